// The CUBE NOC router actor of one CUBE (DESIGN §2): a thin CAF shell over the chip's one
// LinkNetworkModel (STYLE 4). Together with the UCIe actors (ucie_actor.h) it carries messages
// between PEs of different CUBEs, inside a SIP and across SIPs.
//
// Shared model: virtual cut-through couples neighbouring links, so the link reservation tables of
// a chip are ONE LinkNetworkModel, shared by every router and UCIe actor. The spawning code owns
// it (it must outlive the engine's run) and passes a pointer to each of them. This is safe and
// deterministic because the engine runs one handler at a time, on one thread, in event order:
// the model sees Send calls in engine delivery order, nothing else.
//
// Ports:
// - in  std::shared_ptr<const pb::NocSend> from a PE CPU of this CUBE (any unit).
// - out/in std::shared_ptr<const pb::NocHop> to/from the next router on the route, or to the
//   UCIe actor of this SIP (ChipIndex::UcieUnit) when the next hop is a UCIe hop, and from a UCIe
//   actor when this router is the far end of a UCIe hop.
// - out std::shared_ptr<const pb::NocDelivered> to ChipIndex::PeUnit(kPeCpu, dst_pe).
//
// Contract:
// - NocSend at now() (source router): validated (src_pe in this CUBE, dst_pe a PE of another CUBE
//   of the chip, bytes > 0; otherwise an AHBM_CHECK names the router, the message and the
//   reason — kernel-runtime bugs, the tl API validates first). Then LinkNetworkModel::Send(now(),
//   this cube, dst cube, bytes) is called ONCE: it reserves every link of the route for every
//   packet and gives `delivered` (the last packet's tail at the destination CUBE) and the first
//   packet's `injected` (its start on the first link).
// - Then the message travels hop by hop over the route (topology::Router::Route: X-Y, one UCIe
//   hop per SIP boundary through the port CUBEs), one NocHop per hop, carrying the NocSend,
//   hop_count = route length, sent_ps = the source's now(), delivered_ps. Head-time rule (a lower
//   bound of the model's head times, exact when the head meets no contention): the head reaches
//   the end of hop k at T(k+1) = T(k) + lat_k, with T(0) = injected and lat_k hop k's link latency;
//   every T(k) <= delivered_ps. NocHop {hop_index = k} for a NOC hop k is delivered to the router
//   of hop k's far CUBE at T(k+1). For a UCIe hop k the router at its near end hands the message
//   to its SIP's UCIe actor at T(k) (the head at the UCIe link's sending side), with hop_index = k
//   naming the hop the UCIe actor carries; the UCIe actor delivers NocHop {hop_index = k} to the
//   far port CUBE's router at T(k+1). Each router computes its outgoing hop's time as its own
//   now() + lat, so these are the only events: 1 NocSend + one per hop + one per UCIe hop + 1.
// - A NocHop whose hop does not end at this CUBE fails an AHBM_CHECK (a routing bug).
// - Destination router (the last hop ends here): NocDelivered {message_id, src_pe, dst_pe, bytes,
//   sent_ps, noc_hops, ucie_hops, payload, request_id, stream and values (the NocSend's)} to the
//   destination PE's CPU, delivered at delivered_ps.
//
// - Receiver flow control (noc.endpoint_queue_bytes) is not the router's: the sender's kernel
//   runtime sends a NocSend only once the destination endpoint has room for the message
//   (models/noc_endpoint_model.h), so a message the router accepts is always taken at the end.
//
// Stats (NocRouterStats, per router): messages and bytes injected here (NocSends accepted),
// forwarded out of this router onto a link (source and transit hops, hand-offs to UCIe included),
// delivered to a PE of this CUBE, and NocHop events received.
#ifndef AHBMSIM_ACTORS_UNITS_NOC_ROUTER_ACTOR_H_
#define AHBMSIM_ACTORS_UNITS_NOC_ROUTER_ACTOR_H_

#include <cstdint>
#include <optional>
#include <string>

#include "actors/engine.h"
#include "actors/models/link_network_model.h"
#include "actors/unit_actor.h"
#include "caf/actor.hpp"
#include "caf/behavior.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/stateful_actor.hpp"
#include "proto/topology.pb.h"
#include "topology/ids.h"

namespace ahbm::sim {

struct NocRouterStats {
  uint64_t injected_messages = 0;  // NocSends accepted from this CUBE's PEs
  uint64_t injected_bytes = 0;
  uint64_t forwarded_messages = 0;  // messages sent out of this router onto a NOC / UCIe link
  uint64_t forwarded_bytes = 0;
  uint64_t delivered_messages = 0;  // messages delivered to this CUBE's PEs
  uint64_t delivered_bytes = 0;
  uint64_t hops_received = 0;  // NocHop events received (hops ending at this router)
};

struct NocRouterActorState {
  LinkNetworkModel* net = nullptr;  // the chip's shared model, owned by the spawning code
  std::optional<topology::ChipIndex> index;
  topology::CubeId cube;
  std::string unit_name;  // e.g. "sip0.cube5.noc", for diagnostics
  NocRouterStats stats;
};
using NocRouterActor = UnitStateActor<NocRouterActorState>;

// The behavior of the router of CUBE `cube`, unit `self_id`; spawn with
// `engine.system().spawn(NocRouterBehavior, &engine, self_id, topology::ChipIndex(chip), cube,
// net)`. `chip` must be validated and `net` built from the same chip.
caf::behavior NocRouterBehavior(NocRouterActor* self, Engine* engine, UnitId self_id,
                                const topology::ChipIndex& index, topology::CubeId cube,
                                LinkNetworkModel* net);

// Spawns the router of `cube`, registers it as unit ChipIndex::NocRouterUnit(cube) under its
// ChipIndex name, and returns its handle.
caf::actor StartNocRouterActor(Engine& engine, const pb::Chip& chip, topology::CubeId cube,
                               LinkNetworkModel* net);

// The state of a running router actor (stats, tests). The engine runs one handler at a time on
// one thread, so reading it between Run calls is safe; valid until Engine::Shutdown().
const NocRouterActorState& NocRouterStateOf(const caf::actor& actor);

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNITS_NOC_ROUTER_ACTOR_H_
