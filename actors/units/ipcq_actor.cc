#include "actors/units/ipcq_actor.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/msg.h"
#include "actors/time.h"
#include "base/check.h"

namespace ahbm::sim {
namespace {

// Sends the IpcqArrival of every chunk in `departed` (and the IpcqAccepted of every message whose
// last chunk is among them), each delivered at its own time.
void Announce(IpcqActorState& st, Engine* engine, UnitId self_id,
              const std::vector<IpcqChunk>& departed) {
  const SimTime now = engine->now();
  for (const IpcqChunk& chunk : departed) {
    auto it = st.messages.find(chunk.message_id);
    AHBM_CHECK(it != st.messages.end())
        << "IPCQ queue " << st.unit_name() << ": chunk of unknown message " << chunk.message_id;
    IpcqActorState::Message& m = it->second;
    auto arrival = std::make_shared<pb::IpcqArrival>();
    arrival->set_message_id(chunk.message_id);
    arrival->set_src_pe(m.src_pe);
    arrival->set_dst_pe(m.dst_pe);
    arrival->set_chunk_index(chunk.index);
    arrival->set_chunk_count(m.chunk_count);
    arrival->set_bytes(chunk.bytes.value());
    arrival->set_message_bytes(m.bytes);
    arrival->set_queue_unit(self_id);
    arrival->set_request_id(m.request_id);
    arrival->set_stream(m.stream);
    *arrival->mutable_payload() = m.payload;
    if (chunk.index == 0) arrival->set_values(std::move(m.values));
    const UnitId receiver =
        st.index->PeUnit(topology::UnitKind::kPeCpu, st.index->PeOf(m.dst_pe)).value();
    engine->Send(self_id, chunk.arrive - now, receiver,
                 std::shared_ptr<const pb::IpcqArrival>(std::move(arrival)));
    if (!chunk.last || m.accepted_sent) continue;
    auto accepted = std::make_shared<pb::IpcqAccepted>();
    accepted->set_message_id(chunk.message_id);
    accepted->set_accepted_ps(chunk.depart.value());
    engine->Send(self_id, chunk.depart - now, m.sender,
                 std::shared_ptr<const pb::IpcqAccepted>(std::move(accepted)));
  }
}

// IpcqSend at now() (the contract in ipcq_actor.h), from engine->current_src().
void OnSend(IpcqActorState& st, Engine* engine, UnitId self_id, const char* dir_name,
            const pb::IpcqSend& send) {
  const uint64_t id = send.message_id();
  AHBM_CHECK(send.src_pe() == st.pe)
      << "IPCQ queue " << st.unit_name() << ": IpcqSend " << id << " from pe " << send.src_pe()
      << ": src_pe is not this queue's pe " << st.pe;
  AHBM_CHECK(st.neighbour.has_value())
      << "IPCQ queue " << st.unit_name() << ": IpcqSend " << id << " to pe " << send.dst_pe()
      << ": pe " << st.pe << " has no " << dir_name << " neighbour in its CUBE";
  AHBM_CHECK(send.dst_pe() == *st.neighbour)
      << "IPCQ queue " << st.unit_name() << ": IpcqSend " << id << " to pe " << send.dst_pe()
      << ": dst_pe is not the " << dir_name << " neighbour of pe " << st.pe << " (pe "
      << *st.neighbour << ")";
  AHBM_CHECK(send.bytes() > 0) << "IPCQ queue " << st.unit_name() << ": IpcqSend " << id
                               << " has 0 bytes";
  AHBM_CHECK(!st.messages.contains(id)) << "IPCQ queue " << st.unit_name() << ": IpcqSend " << id
                                        << ": message_id is still pending on this queue";
  const IpcqSendResult result = st.model->Send(engine->now(), id, Bytes(send.bytes()));
  // The sender decided at its issue whether it waits for the IpcqAccepted (the kernel runtime's
  // shadow of this queue's credit, a declared shortcut: actors/README.md); the queue's own
  // decision must be the same.
  AHBM_CHECK(send.sender_blocks() == (result.blocked_bytes.value() != 0))
      << "IPCQ queue " << st.unit_name() << ": IpcqSend " << id << " of " << send.bytes()
      << " B: the sender "
      << (send.sender_blocks() ? "waits for credit, but every chunk has credit now"
                               : "goes on, but a chunk has no credit now");
  ++st.sent_messages;
  IpcqActorState::Message& m = st.messages[id];
  m.sender = engine->current_src();
  m.src_pe = send.src_pe();
  m.dst_pe = send.dst_pe();
  m.bytes = send.bytes();
  m.request_id = send.request_id();
  m.stream = send.stream();
  m.chunk_count = static_cast<uint32_t>((send.bytes() + st.chunk_bytes - 1) / st.chunk_bytes);
  m.payload = send.payload();
  m.values = send.values();
  st.fifo.push_back(id);
  if (result.blocked_bytes.value() == 0) {
    // Every chunk has credit: the sender may go on at once (DESIGN §4: `send` blocks only while
    // the destination queue has no credit).
    m.accepted_sent = true;
    auto accepted = std::make_shared<pb::IpcqAccepted>();
    accepted->set_message_id(id);
    accepted->set_accepted_ps(engine->now().value());
    engine->Send(self_id, SimTime(0), m.sender,
                 std::shared_ptr<const pb::IpcqAccepted>(std::move(accepted)));
  }
  Announce(st, engine, self_id, result.departed);
}

}  // namespace

caf::behavior IpcqBehavior(IpcqActor* self, Engine* engine, UnitId self_id, const pb::Ipcq& ipcq,
                           const topology::ChipIndex& index, uint32_t pe, topology::Dir dir) {
  IpcqActorState& init = self->state;
  init.model.emplace(ipcq);
  init.chunk_bytes = ipcq.chunk_bytes();
  init.index.emplace(index);
  init.unit = self_id;
  init.pe = pe;
  const topology::PeId id = init.index->PeOf(pe);
  if (std::optional<uint32_t> n = init.index->pe_mesh().Neighbour(id.pe, dir)) {
    init.neighbour = init.index->GlobalPe(topology::PeId{id.sip, id.cube, *n});
  }
  const char* dir_name = topology::DirName(dir);
  return self->Handlers(
      [self, engine, self_id, dir_name](const Msg<pb::IpcqSend>& send) {
        OnSend(self->state, engine, self_id, dir_name, *send);
      },
      [self, engine, self_id](const Msg<pb::IpcqPop>& pop) {
        IpcqActorState& st = self->state;
        const uint64_t id = pop->message_id();
        AHBM_CHECK(!st.fifo.empty() && st.fifo.front() == id)
            << "IPCQ queue " << st.unit_name() << ": IpcqPop of message " << id
            << ", but the head message is "
            << (st.fifo.empty() ? std::string("none") : std::to_string(st.fifo.front()));
        const IpcqPopResult result = st.model->Pop(engine->now(), id, Bytes(pop->bytes()));
        Announce(st, engine, self_id, result.departed);
        if (result.message_complete) {
          st.messages.erase(id);
          st.fifo.pop_front();
        }
      });
}

caf::actor StartIpcqActor(Engine& engine, const pb::Chip& chip, uint32_t pe, topology::Dir dir) {
  const topology::ChipIndex index(chip);
  const UnitId id = index.IpcqUnit(index.PeOf(pe), dir).value();
  caf::actor actor =
      engine.system().spawn(IpcqBehavior, &engine, id, chip.sip().cube().ipcq(), index, pe, dir);
  engine.Register(id, index.Name(topology::UnitId(id)), actor);
  return actor;
}

const IpcqActorState& IpcqStateOf(const caf::actor& actor) {
  return caf::actor_cast<IpcqActor*>(actor)->state;
}

}  // namespace ahbm::sim
