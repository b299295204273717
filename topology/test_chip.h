// Test helper: the structural part of a chip (counts and meshes), enough for ChipIndex and
// Router. Rates and sizes are left unset; use the shipped configs for those.
#ifndef AHBM_TOPOLOGY_TEST_CHIP_H_
#define AHBM_TOPOLOGY_TEST_CHIP_H_

#include <cstdint>

#include "proto/topology.pb.h"

namespace ahbm::topology {

struct ChipShape {
  uint32_t sips = 1;
  uint32_t mesh_rows = 4;
  uint32_t mesh_cols = 4;
  uint32_t pe_rows = 2;
  uint32_t pe_cols = 4;
  uint32_t channels_per_pe = 8;
};

inline pb::Chip MakeStructuralChip(const ChipShape& shape) {
  pb::Chip chip;
  chip.set_sips(shape.sips);
  pb::Sip* sip = chip.mutable_sip();
  sip->set_cubes(shape.mesh_rows * shape.mesh_cols);
  sip->mutable_cube_mesh()->set_rows(shape.mesh_rows);
  sip->mutable_cube_mesh()->set_cols(shape.mesh_cols);
  pb::Cube* cube = sip->mutable_cube();
  cube->set_pes(shape.pe_rows * shape.pe_cols);
  cube->mutable_pe_mesh()->set_rows(shape.pe_rows);
  cube->mutable_pe_mesh()->set_cols(shape.pe_cols);
  cube->set_hbm_pseudo_channels(shape.pe_rows * shape.pe_cols * shape.channels_per_pe);
  cube->mutable_pe()->set_hbm_channels(shape.channels_per_pe);
  return chip;
}

}  // namespace ahbm::topology

#endif  // AHBM_TOPOLOGY_TEST_CHIP_H_
