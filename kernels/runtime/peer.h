// The other end of a send / recv (DESIGN §4): an IPCQ neighbour or a PE of another CUBE.
#ifndef AHBMSIM_KERNELS_RUNTIME_PEER_H_
#define AHBMSIM_KERNELS_RUNTIME_PEER_H_

#include <cstdint>

#include "topology/mesh.h"

namespace ahbm::kernels {

class Peer {
 public:
  // The PE-mesh neighbour inside this CUBE, over its IPCQ queue pair.
  static Peer Ipcq(topology::Dir dir) { return Peer(Kind::kIpcq, dir, 0); }
  // Any PE of another CUBE (any SIP), over the CUBE NOC (and UCIe), routed X-Y.
  static Peer Pe(uint32_t global_pe) { return Peer(Kind::kPe, topology::Dir::kNorth, global_pe); }

  enum class Kind : uint8_t { kIpcq, kPe };
  Kind kind() const { return kind_; }
  topology::Dir dir() const { return dir_; }
  uint32_t pe() const { return pe_; }

 private:
  Peer(Kind kind, topology::Dir dir, uint32_t pe) : kind_(kind), dir_(dir), pe_(pe) {}
  Kind kind_;
  topology::Dir dir_;
  uint32_t pe_;
};

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_RUNTIME_PEER_H_
