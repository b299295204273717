// Helpers shared by the NOC router and UCIe actor tests.
#ifndef AHBMSIM_ACTORS_UNITS_LINK_TEST_UTIL_H_
#define AHBMSIM_ACTORS_UNITS_LINK_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "actors/engine.h"
#include "actors/msg.h"
#include "actors/time.h"
#include "proto/commands.pb.h"
#include "topology/ids.h"

namespace ahbm::sim::testing {

// PE `src`'s CPU sends `bytes` to PE `dst` through its CUBE's router at absolute time `at`.
inline void SendNocMessage(Engine& engine, const topology::ChipIndex& index, SimTime at,
                           uint64_t id, uint32_t src, uint32_t dst, uint64_t bytes) {
  auto send = std::make_shared<pb::NocSend>();
  send->set_message_id(id);
  send->set_src_pe(src);
  send->set_dst_pe(dst);
  send->set_bytes(bytes);
  engine.Send(index.PeUnit(topology::UnitKind::kPeCpu, index.PeOf(src)).value(), at - engine.now(),
              index.NocRouterUnit(index.PeOf(src).cube_id()).value(),
              std::shared_ptr<const pb::NocSend>(std::move(send)));
}

// The CUBEs an X-Y route inside one SIP (a mesh of `cols` columns) visits after `from`, in
// order: columns first, then rows.
inline std::vector<uint32_t> XyPathInSip(uint32_t from, uint32_t to, uint32_t cols) {
  std::vector<uint32_t> path;
  uint32_t row = from / cols, col = from % cols;
  while (col != to % cols) {
    col = col < to % cols ? col + 1 : col - 1;
    path.push_back(row * cols + col);
  }
  while (row != to / cols) {
    row = row < to / cols ? row + 1 : row - 1;
    path.push_back(row * cols + col);
  }
  return path;
}

}  // namespace ahbm::sim::testing

#endif  // AHBMSIM_ACTORS_UNITS_LINK_TEST_UTIL_H_
