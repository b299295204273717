#include "actors/units/ucie_actor.h"

#include <memory>
#include <utility>
#include <vector>

#include "actors/msg.h"
#include "actors/time.h"
#include "base/check.h"
#include "proto/commands.pb.h"
#include "topology/routing.h"

namespace ahbm::sim {

caf::behavior UcieBehavior(UcieActor* self, Engine* engine, UnitId self_id,
                           const topology::ChipIndex& index, uint32_t sip, LinkNetworkModel* net) {
  UcieActorState& init = self->state;
  AHBM_CHECK(net != nullptr) << "UCIe actor of sip " << sip << " needs the chip's LinkNetworkModel";
  init.net = net;
  init.index.emplace(index);
  init.sip = sip;
  init.unit_name = init.index->Name(topology::UnitId(self_id));
  return self->Handlers([self, engine, self_id](const Msg<pb::NocHop>& in) {
    UcieActorState& st = self->state;
    const pb::NocSend& m = in->message();
    const topology::CubeId from = st.index->PeOf(m.src_pe()).cube_id();
    const topology::CubeId to = st.index->PeOf(m.dst_pe()).cube_id();
    const std::vector<topology::Hop> route = st.net->router().Route(from, to);
    const uint32_t k = in->hop_index();
    AHBM_CHECK(in->hop_count() == route.size() && k < route.size() &&
               route[k].link == topology::Hop::Link::kUcie && route[k].from.sip == st.sip)
        << "UCIe " << st.unit_name << ": NocHop of message " << m.message_id() << " (pe "
        << m.src_pe() << " -> pe " << m.dst_pe() << ", hop " << k << " of " << in->hop_count()
        << ") is not a UCIe hop leaving sip " << st.sip << "; the route has " << route.size()
        << " hops";
    const topology::Hop& hop = route[k];
    ++st.stats.forwarded_messages;
    st.stats.forwarded_bytes += m.bytes();
    engine->Send(self_id, st.net->UcieLink(st.sip, hop.dir).Latency(),
                 st.index->NocRouterUnit(hop.to).value(), in.body);
  });
}

caf::actor StartUcieActor(Engine& engine, const pb::Chip& chip, uint32_t sip,
                          LinkNetworkModel* net) {
  const topology::ChipIndex index(chip);
  const UnitId id = index.UcieUnit(sip).value();
  caf::actor actor = engine.system().spawn(UcieBehavior, &engine, id, index, sip, net);
  engine.Register(id, index.Name(topology::UnitId(id)), actor);
  return actor;
}

const UcieActorState& UcieStateOf(const caf::actor& actor) {
  return caf::actor_cast<UcieActor*>(actor)->state;
}

}  // namespace ahbm::sim
