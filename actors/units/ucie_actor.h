// The UCIe actor of one SIP (DESIGN §2): carries NOC messages over the UCIe links leaving this
// SIP (to sip - 1 and sip + 1). A thin CAF shell over the chip's one LinkNetworkModel, shared with
// every router (see noc_router_actor.h for why it is shared and why that is safe); the model's
// timing was computed once, by the message's source router, so this actor only moves the message
// and counts it.
//
// Ports:
// - in  std::shared_ptr<const pb::NocHop> from the router of this SIP's port CUBE (or the source
//   router when that is the port CUBE): hop_index names the UCIe hop to carry.
// - out std::shared_ptr<const pb::NocHop> (same hop_index) to the router of the far SIP's port
//   CUBE, ChipIndex::NocRouterUnit(hop.to).
//
// Contract:
// - A NocHop arriving at now() = T(k) (the head at the UCIe link's sending side) is forwarded with
//   delay = the UCIe link's latency, i.e. delivered at T(k+1) (the head rule of
//   noc_router_actor.h).
// - The hop must be a UCIe hop leaving this SIP (Router::Route of the message's CUBEs); anything
//   else is a routing bug and fails an AHBM_CHECK naming this unit and the message.
//
// Stats (UcieStats): messages and bytes forwarded over this SIP's UCIe links.
#ifndef AHBMSIM_ACTORS_UNITS_UCIE_ACTOR_H_
#define AHBMSIM_ACTORS_UNITS_UCIE_ACTOR_H_

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

struct UcieStats {
  uint64_t forwarded_messages = 0;  // messages carried over a UCIe link leaving this SIP
  uint64_t forwarded_bytes = 0;
};

struct UcieActorState {
  LinkNetworkModel* net = nullptr;  // the chip's shared model, owned by the spawning code
  std::optional<topology::ChipIndex> index;
  uint32_t sip = 0;
  std::string unit_name;  // e.g. "sip0.ucie", for diagnostics
  UcieStats stats;
};
using UcieActor = UnitStateActor<UcieActorState>;

// The behavior of the UCIe actor of SIP `sip`, unit `self_id`; spawn with
// `engine.system().spawn(UcieBehavior, &engine, self_id, topology::ChipIndex(chip), sip, net)`.
// `chip` must be validated and `net` built from the same chip.
caf::behavior UcieBehavior(UcieActor* self, Engine* engine, UnitId self_id,
                           const topology::ChipIndex& index, uint32_t sip, LinkNetworkModel* net);

// Spawns the UCIe actor of `sip`, registers it as unit ChipIndex::UcieUnit(sip) under its
// ChipIndex name, and returns its handle.
caf::actor StartUcieActor(Engine& engine, const pb::Chip& chip, uint32_t sip,
                          LinkNetworkModel* net);

// The state of a running UCIe actor (stats, tests); valid until Engine::Shutdown().
const UcieActorState& UcieStateOf(const caf::actor& actor);

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNITS_UCIE_ACTOR_H_
