#include "actors/units/noc_router_actor.h"

#include <memory>
#include <ostream>
#include <utility>
#include <vector>

#include "actors/msg.h"
#include "actors/time.h"
#include "base/check.h"
#include "proto/commands.pb.h"
#include "topology/routing.h"

namespace ahbm::sim {
namespace {

using topology::CubeId;
using topology::Hop;

std::ostream& operator<<(std::ostream& os, CubeId c) {
  return os << "sip" << c.sip << ".cube" << c.cube;
}

CubeId CubeOfPe(const topology::ChipIndex& index, uint32_t pe) { return index.PeOf(pe).cube_id(); }

// Sends the message on over hop `k` of `route`, whose sending side its head reaches after
// `to_start` (from now()): a NOC hop to the far router at + lat, a UCIe hop to this SIP's UCIe
// actor at once (it adds the UCIe latency).
void SendHop(NocRouterActorState& st, Engine* engine, UnitId self_id, const pb::NocHop& in,
             const std::vector<Hop>& route, uint32_t k, SimTime to_start) {
  const Hop& hop = route[k];
  auto out = std::make_shared<pb::NocHop>(in);
  out->set_hop_index(k);
  UnitId dst;
  SimTime delay = to_start;
  if (hop.link == Hop::Link::kUcie) {
    dst = st.index->UcieUnit(hop.from.sip).value();
  } else {
    dst = st.index->NocRouterUnit(hop.to).value();
    delay += st.net->NocLink(hop.from, hop.dir).Latency();
  }
  ++st.stats.forwarded_messages;
  st.stats.forwarded_bytes += in.message().bytes();
  engine->Send(self_id, delay, dst, std::shared_ptr<const pb::NocHop>(std::move(out)));
}

}  // namespace

caf::behavior NocRouterBehavior(NocRouterActor* self, Engine* engine, UnitId self_id,
                                const topology::ChipIndex& index, CubeId cube,
                                LinkNetworkModel* net) {
  NocRouterActorState& init = self->state;
  AHBM_CHECK(net != nullptr) << "NOC router of " << cube << " needs the chip's LinkNetworkModel";
  init.net = net;
  init.index.emplace(index);
  init.cube = cube;
  init.unit_name = init.index->Name(topology::UnitId(self_id));
  return self->Handlers(
      [self, engine, self_id](const Msg<pb::NocSend>& send) {
        NocRouterActorState& st = self->state;
        const topology::ChipIndex& index = *st.index;
        const uint64_t id = send->message_id();
        AHBM_CHECK(send->src_pe() < index.num_pes() && CubeOfPe(index, send->src_pe()) == st.cube)
            << "NOC router " << st.unit_name << ": NocSend " << id << " from pe " << send->src_pe()
            << ": src_pe is not a PE of this CUBE";
        AHBM_CHECK(send->dst_pe() < index.num_pes())
            << "NOC router " << st.unit_name << ": NocSend " << id << " to pe " << send->dst_pe()
            << ": no such PE (the chip has " << index.num_pes() << ")";
        const CubeId to = CubeOfPe(index, send->dst_pe());
        AHBM_CHECK(to != st.cube) << "NOC router " << st.unit_name << ": NocSend " << id
                                  << " to pe " << send->dst_pe()
                                  << ": dst_pe is in the sender's own CUBE (use IPCQ)";
        AHBM_CHECK(send->bytes() > 0)
            << "NOC router " << st.unit_name << ": NocSend " << id << " has 0 bytes";

        const SimTime now = engine->now();
        const NetworkMessageTiming timing = st.net->Send(now, st.cube, to, Bytes(send->bytes()));
        const std::vector<Hop> route = st.net->router().Route(st.cube, to);
        AHBM_CHECK(!route.empty() && timing.noc_hops + timing.ucie_hops == route.size())
            << "NOC router " << st.unit_name << ": route of NocSend " << id << " has "
            << route.size() << " hops, the model " << timing.noc_hops + timing.ucie_hops;
        ++st.stats.injected_messages;
        st.stats.injected_bytes += send->bytes();
        pb::NocHop hop;
        *hop.mutable_message() = *send;
        hop.set_hop_count(static_cast<uint32_t>(route.size()));
        hop.set_sent_ps(now.value());
        hop.set_delivered_ps(timing.delivered.value());
        SendHop(st, engine, self_id, hop, route, 0, timing.packets.front().injected - now);
      },
      [self, engine, self_id](const Msg<pb::NocHop>& in) {
        NocRouterActorState& st = self->state;
        const pb::NocSend& m = in->message();
        const CubeId from = CubeOfPe(*st.index, m.src_pe());
        const CubeId to = CubeOfPe(*st.index, m.dst_pe());
        const std::vector<Hop> route = st.net->router().Route(from, to);
        const uint32_t k = in->hop_index();
        AHBM_CHECK(in->hop_count() == route.size() && k < route.size() && route[k].to == st.cube)
            << "NOC router " << st.unit_name << ": NocHop of message " << m.message_id() << " ("
            << from << " -> " << to << ", hop " << k << " of " << in->hop_count()
            << ") does not end at this router; the route has " << route.size() << " hops";
        ++st.stats.hops_received;
        if (k + 1 < route.size()) {
          SendHop(st, engine, self_id, *in, route, k + 1, SimTime(0));
          return;
        }
        const SimTime delivered(in->delivered_ps());
        AHBM_CHECK(delivered >= engine->now())
            << "NOC router " << st.unit_name << ": head of message " << m.message_id()
            << " reached the destination at " << engine->now() << ", after its delivery at "
            << delivered;
        auto done = std::make_shared<pb::NocDelivered>();
        done->set_message_id(m.message_id());
        done->set_src_pe(m.src_pe());
        done->set_dst_pe(m.dst_pe());
        done->set_bytes(m.bytes());
        done->set_sent_ps(in->sent_ps());
        done->set_request_id(m.request_id());
        done->set_stream(m.stream());
        for (const Hop& hop : route) {
          if (hop.link == Hop::Link::kUcie) {
            done->set_ucie_hops(done->ucie_hops() + 1);
          } else {
            done->set_noc_hops(done->noc_hops() + 1);
          }
        }
        *done->mutable_payload() = m.payload();
        done->set_values(m.values());
        ++st.stats.delivered_messages;
        st.stats.delivered_bytes += m.bytes();
        const UnitId cpu =
            st.index->PeUnit(topology::UnitKind::kPeCpu, st.index->PeOf(m.dst_pe())).value();
        engine->Send(self_id, delivered - engine->now(), cpu,
                     std::shared_ptr<const pb::NocDelivered>(std::move(done)));
      });
}

caf::actor StartNocRouterActor(Engine& engine, const pb::Chip& chip, CubeId cube,
                               LinkNetworkModel* net) {
  const topology::ChipIndex index(chip);
  const UnitId id = index.NocRouterUnit(cube).value();
  caf::actor actor = engine.system().spawn(NocRouterBehavior, &engine, id, index, cube, net);
  engine.Register(id, index.Name(topology::UnitId(id)), actor);
  return actor;
}

const NocRouterActorState& NocRouterStateOf(const caf::actor& actor) {
  return caf::actor_cast<NocRouterActor*>(actor)->state;
}

}  // namespace ahbm::sim
