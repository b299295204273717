// KernelRuntime's messaging (runtime.h's contract): IPCQ and NOC sends, receive posts, the
// matching of arrived messages to receives per channel, and IPCQ demultiplexing staging.
#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "actors/msg.h"
#include "base/check.h"
#include "kernels/runtime/runtime.h"
#include "proto/trace.pb.h"

namespace ahbm::kernels {
namespace {

// Whether `msg` belongs to `inst`'s (request, stream).
bool IsFor(const IncomingMessage& msg, const Instance& inst) {
  return msg.request_id == inst.request_id() && msg.stream == inst.stream;
}

uint64_t Elements(const pb::TensorRef& t) {
  uint64_t n = 1;
  for (uint64_t d : t.shape()) n *= d;
  return n;
}

}  // namespace

// ---- calls ----

bool KernelRuntime::IssueSend(Instance& inst, Cpu& cpu, const Invocation& inv) {
  const SimTime now = Now();
  const SimTime issue = cpu.core.Charge(cpu.core.profile().send_cycles());
  sim::Engine& engine = *sim_->context().engine;
  const uint64_t id = MessageId(inst.pe, ++cpu.messages_sent);
  const Peer& peer = *inv.peer;
  // Data mode: the values leave with the message (IpcqSend / NocSend `values`).
  std::string values;
  if (store_ != nullptr) {
    absl::StatusOr<std::vector<float>> read = store_->Read(inv.payload.ToRef());
    if (!read.ok()) {
      Fail(inst, absl::StrCat("send payload: ", std::string(read.status().message())));
    }
    values.resize(read->size() * sizeof(float));
    std::memcpy(values.data(), read->data(), values.size());
  }
  if (peer.kind() == Peer::Kind::kIpcq) {
    const topology::PeId me = index().PeOf(inst.pe);
    const uint32_t dst = index().GlobalPe(
        topology::PeId{me.sip, me.cube, *index().pe_mesh().Neighbour(me.pe, peer.dir())});
    const sim::UnitId queue = index().IpcqUnit(me, peer.dir()).value();
    // The sender's credit count: bytes sent on the queue minus bytes the receiver has popped
    // (pops already issued count, as credit on its way back: IpcqModel::WouldBlock).
    int64_t& unpopped = ipcq_unpopped_[queue];
    unpopped += static_cast<int64_t>(inv.payload.bytes());
    const bool blocks = unpopped > static_cast<int64_t>(ipcq_queue_bytes_);
    auto send = std::allocate_shared<pb::IpcqSend>(internal::PoolAllocator<pb::IpcqSend>());
    send->set_message_id(id);
    send->set_src_pe(inst.pe);
    send->set_dst_pe(dst);
    send->set_bytes(inv.payload.bytes());
    send->set_request_id(inst.request_id());
    send->set_stream(inst.stream);
    send->set_sender_blocks(blocks);  // the queue checks it (actors/README.md, shortcuts)
    inv.payload.WriteTo(*send->mutable_payload());
    send->set_values(std::move(values));
    engine.Send(cpu.core.unit(), issue - now, queue, std::shared_ptr<const pb::IpcqSend>(send));
    RecordSend(inst, inv, "send_ipcq", id, dst, issue);
    if (!blocks) return true;
    inst.waiting_send = true;
    inst.waiting_message = id;
    inst.waiting_what = {Instance::WaitWhat::Kind::kSend, 0, dst, nullptr, peer};
    cpu.core.WaitEvent(inst, issue);
    return false;
  }
  if (peer.pe() >= index().num_pes() ||
      index().PeOf(peer.pe()).cube_id() == index().PeOf(inst.pe).cube_id()) {
    Fail(inst, absl::StrCat("NOC send to pe ", peer.pe(), ": not a PE of another CUBE"));
  }
  // The destination's CPU owns its endpoint (and takes the message).
  if (peer.pe() >= cpu_by_pe_.size() || cpu_by_pe_[peer.pe()] == nullptr) {
    Fail(inst, absl::StrCat("NOC send to pe ", peer.pe(), ": no kernel instance runs there"));
  }
  auto send = std::allocate_shared<pb::NocSend>(internal::PoolAllocator<pb::NocSend>());
  send->set_message_id(id);
  send->set_src_pe(inst.pe);
  send->set_dst_pe(peer.pe());
  send->set_bytes(inv.payload.bytes());
  send->set_request_id(inst.request_id());
  send->set_stream(inst.stream);
  inv.payload.WriteTo(*send->mutable_payload());
  send->set_values(std::move(values));
  RecordSend(inst, inv, "send_noc", id, peer.pe(), issue);
  // The destination's CPU owns its endpoint: ask it for room; the CPU is this instance's until
  // the answer, which comes in this instant (runtime.h, NOC send).
  auto ask = std::allocate_shared<pb::NocRoomRequest>(
      internal::PoolAllocator<pb::NocRoomRequest>());
  ask->set_message_id(id);
  ask->set_src_pe(inst.pe);
  ask->set_dst_pe(peer.pe());
  ask->set_bytes(inv.payload.bytes());
  ask->set_request_id(inst.request_id());
  ask->set_stream(inst.stream);
  ask->set_ready_ps(issue.value());
  cpu.noc_unsent[id] = std::shared_ptr<const pb::NocSend>(send);
  engine.Send(cpu.core.unit(), SimTime(0),
              index().PeUnit(topology::UnitKind::kPeCpu, index().PeOf(peer.pe())).value(),
              std::shared_ptr<const pb::NocRoomRequest>(ask));
  inst.waiting_send = true;
  inst.waiting_message = id;
  inst.waiting_what = {Instance::WaitWhat::Kind::kSend, id, peer.pe(), nullptr, peer};
  cpu.core.WaitEvent(inst, issue);
  cpu.noc_asking = id;
  cpu.core.AwaitAnswer(inst);
  return false;
}

bool KernelRuntime::PostRecv(Instance& inst, Cpu& cpu, const Invocation& inv) {
  const SimTime issue = cpu.core.Charge(cpu.core.profile().recv_cycles());
  const uint64_t key = ChannelKey(inst.pe, *inv.peer);
  PostedRecv post;
  post.handle = inv.cmd_id;
  post.inst = &inst;
  post.posted = issue;
  post.dst = inv.result;
  post.call = inv.call;
  cpu.channels[key].recvs.push_back(post);
  if (inv.peer->kind() == Peer::Kind::kPe) {
    // The NOC endpoint learns of the receive: a message waiting for it may leave.
    ReleaseNoc(cpu, Endpoint(cpu).PostRecv(Now(), inv.peer->pe(),
                                           NocFlow(inst.request_id(), inst.stream), issue));
  }
  if (cpu.receive.size() <= inv.cmd_id) cpu.receive.resize(inv.cmd_id + 1, 0);
  cpu.receive[inv.cmd_id] = 1;
  cpu.core.AddOutstanding(inst, inv.cmd_id);
  NoteWrite(cpu, inv, inv.cmd_id);
  PumpChannel(cpu, key);
  if (!inv.blocking || cpu.core.IsDone(inv.cmd_id)) return true;
  inst.waiting_what = {Instance::WaitWhat::Kind::kRecv, inv.cmd_id, 0, nullptr, *inv.peer};
  cpu.core.Wait(inst, inv.cmd_id, issue);
  return false;
}

// ---- channels ----

std::string KernelRuntime::DescribePeer(uint32_t pe, const Peer& peer) const {
  if (peer.kind() == Peer::Kind::kIpcq) {
    const topology::PeId me = index().PeOf(pe);
    const std::optional<uint32_t> n = index().pe_mesh().Neighbour(me.pe, peer.dir());
    if (!n) return absl::StrCat("no neighbour to the ", topology::DirName(peer.dir()));
    const topology::PeId src{me.sip, me.cube, *n};
    return absl::StrCat(PeName(index().GlobalPe(src)), " over IPCQ queue ",
                        index().Name(index().IpcqUnit(src, topology::Opposite(peer.dir()))));
  }
  return absl::StrCat(PeName(peer.pe()), " over the NOC");
}

uint64_t KernelRuntime::ChannelKey(uint32_t pe, const Peer& from) const {
  if (from.kind() == Peer::Kind::kIpcq) {
    const topology::PeId me = index().PeOf(pe);
    const std::optional<uint32_t> n = index().pe_mesh().Neighbour(me.pe, from.dir());
    AHBM_CHECK(n.has_value()) << "recv from a missing neighbour";
    const topology::PeId src{me.sip, me.cube, *n};
    // The neighbour's queue towards me points the opposite way.
    const sim::UnitId queue = index().IpcqUnit(src, topology::Opposite(from.dir())).value();
    return kIpcqChannel | queue;
  }
  return from.pe();
}

void KernelRuntime::PopArrived(Cpu& cpu, Channel& ch, IncomingMessage& msg, SimTime at) {
  if (msg.arrived_bytes <= msg.popped_bytes) return;
  const SimTime now = Now();
  // The queue's pops stay in time order (the model's rule; also FIFO: none before the previous).
  at = std::max({now, at, ch.last_pop});
  // The pop names the chunks seen to arrive: one arriving before `at` is popped on its own arrival.
  auto pop = std::allocate_shared<pb::IpcqPop>(internal::PoolAllocator<pb::IpcqPop>());
  pop->set_message_id(msg.message_id);
  pop->set_bytes(msg.arrived_bytes - msg.popped_bytes);
  sim_->context().engine->Send(cpu.core.unit(), at - now, msg.queue,
                               std::shared_ptr<const pb::IpcqPop>(pop));
  ipcq_unpopped_[msg.queue] -= static_cast<int64_t>(msg.arrived_bytes - msg.popped_bytes);
  if (msg.popped_bytes == 0) msg.first_pop = at;
  msg.popped_bytes = msg.arrived_bytes;
  msg.last_pop = at;
  ch.last_pop = at;
}

uint64_t KernelRuntime::Deliver(Cpu& cpu, const IncomingMessage& msg, const PostedRecv& recv,
                                SimTime end, bool staged) {
  const uint32_t pe = cpu.core.pe();
  // A size mismatch is the receiving kernel's error, in timing mode as in data mode.
  const bool fits = msg.elements == recv.dst.elements();
  if (!fits && recv.inst->error.empty()) {
    recv.inst->error = absl::StrCat(PeName(pe), ": recv ", recv.handle, " of ",
                                    recv.dst.elements(), " elements got message ", msg.message_id,
                                    " of ", msg.elements, " elements from pe ", msg.src_pe);
  }
  if (store_ != nullptr) {
    std::vector<float> values(msg.values.size() / sizeof(float));
    AHBM_CHECK(values.size() * sizeof(float) == msg.values.size() && values.size() == msg.elements)
        << "message " << msg.message_id << ": " << msg.values.size() << " bytes of values, "
        << msg.elements << " elements";
    std::memcpy(values.data(), msg.values.data(), msg.values.size());
    if (fits) {
      if (absl::Status s = store_->Write(recv.dst.ToRef(), values); !s.ok()) {
        recv.inst->error = std::string(s.message());
      }
    }
  }
  if (msg.queue == 0) {
    // NOC: a message taken from the endpoint queue gives its credit back at `end`.
    ReleaseNoc(cpu, Endpoint(cpu).Consume(Now(), msg.message_id, end));
  }
  if (observe::OpLog* log = sim_->context().op_log) {
    pb::OpRecord rec;
    rec.set_unit(cpu.core.unit());
    rec.set_unit_name(sim_->context().Name(cpu.core.unit()));
    rec.set_op(msg.queue != 0 ? "recv_ipcq" : "recv_noc");
    rec.set_cmd_id(recv.handle);
    rec.set_issue_ps(recv.posted.value());
    rec.set_start_ps(std::min(recv.posted, end).value());
    rec.set_end_ps(end.value());
    rec.set_bytes_read(recv.dst.bytes());
    rec.set_request_id(recv.inst->request_id());
    rec.set_label(absl::StrCat("from pe ", msg.src_pe, " msg ", msg.message_id,
                               staged ? " (staged)" : ""));
    rec.set_message_id(msg.message_id);
    if (recv.call != 0) {
      rec.set_instance(recv.inst->ordinal);
      rec.set_call(recv.call);
    }
    log->AddOp(std::move(rec));
  }
  return recv.handle;
}

void KernelRuntime::PumpChannel(Cpu& cpu, uint64_t key) {
  Channel& ch = cpu.channels[key];
  const bool ipcq = (key & kIpcqChannel) != 0;
  // One step per pass; Complete() may resume kernels that post here again, so nothing is held
  // across it.
  while (true) {
    // A receive (in post order) takes its (request, stream)'s oldest available message: staged
    // (IPCQ) or delivered (NOC).
    std::deque<IncomingMessage>& pool = ipcq ? ch.staged : ch.messages;
    auto r = ch.recvs.begin();
    auto m = pool.end();
    for (; r != ch.recvs.end(); ++r) {
      m = std::find_if(pool.begin(), pool.end(),
                       [&](const IncomingMessage& x) { return IsFor(x, *r->inst); });
      if (m != pool.end()) break;
    }
    if (r != ch.recvs.end()) {
      // Staged (popped already) or delivered (NOC): no pop, no credit change.
      const SimTime end = std::max({r->posted, m->last_arrival, m->last_pop});
      const uint64_t handle = Deliver(cpu, *m, *r, end, ipcq);
      if (ipcq) cpu.staged_bytes -= m->bytes;
      pool.erase(m);
      ch.recvs.erase(r);
      cpu.core.Complete(handle, end);
      continue;
    }
    if (!ipcq || ch.messages.empty()) return;
    // IPCQ: the queue's head message.
    IncomingMessage& head = ch.messages.front();
    auto own = std::find_if(ch.recvs.begin(), ch.recvs.end(),
                            [&](const PostedRecv& r) { return IsFor(head, *r.inst); });
    if (own != ch.recvs.end()) {
      // Pop what has arrived (at the post if it lies ahead); later chunks pop on arrival.
      PopArrived(cpu, ch, head, own->posted);
      if (!head.complete) return;
      const SimTime end = std::max({own->posted, head.last_arrival, head.last_pop});
      const uint64_t handle = Deliver(cpu, head, *own, end, false);
      if (head.staging) cpu.staged_bytes -= head.bytes;
      ch.messages.pop_front();
      ch.recvs.erase(own);
      cpu.core.Complete(handle, end);
      continue;
    }
    if (!head.staging) {
      // Stage only for a waiting receive (of another instance) and only what fits.
      if (ch.recvs.empty() || cpu.staged_bytes + head.bytes > kDemuxStagingBytes) return;
      head.staging = true;
      head.stage_from = ch.recvs.front().posted;
      head.stage_for = ch.recvs.front().inst->request_id();
      cpu.staged_bytes += head.bytes;
    }
    PopArrived(cpu, ch, head, head.stage_from);
    if (!head.complete) return;
    if (observe::OpLog* log = sim_->context().op_log) {
      pb::OpRecord rec;
      rec.set_unit(cpu.core.unit());
      rec.set_unit_name(sim_->context().Name(cpu.core.unit()));
      rec.set_op("stage_ipcq");
      rec.set_issue_ps(head.first_pop.value());
      rec.set_start_ps(head.first_pop.value());
      rec.set_end_ps(head.last_pop.value());
      rec.set_bytes_written(head.bytes);
      rec.set_request_id(head.request_id);
      rec.set_label(absl::StrCat("from pe ", head.src_pe, " msg ", head.message_id,
                                 " (request ", head.stage_for, " waits)"));
      rec.set_message_id(head.message_id);
      log->AddOp(std::move(rec));
    }
    ch.staged.push_back(std::move(head));
    ch.messages.pop_front();
  }
}

sim::NocEndpointModel& KernelRuntime::Endpoint(Cpu& cpu) {
  if (!cpu.endpoint) cpu.endpoint.emplace(sim::Bytes(noc_endpoint_bytes_));
  return *cpu.endpoint;
}

void KernelRuntime::ReleaseNoc(Cpu& cpu,
                               const std::vector<sim::NocEndpointModel::Departure>& deps) {
  const SimTime now = Now();
  for (const sim::NocEndpointModel::Departure& d : deps) {
    auto it = cpu.endpoint_blocked.find(d.message_id);
    AHBM_CHECK(it != cpu.endpoint_blocked.end())
        << PeName(cpu.core.pe()) << ": NOC message " << d.message_id << " was not held back";
    auto accepted =
        std::allocate_shared<pb::NocAccepted>(internal::PoolAllocator<pb::NocAccepted>());
    accepted->set_message_id(d.message_id);
    accepted->set_accepted_ps(d.depart.value());
    const sim::UnitId sender =
        index().PeUnit(topology::UnitKind::kPeCpu, index().PeOf(it->second)).value();
    cpu.endpoint_blocked.erase(it);
    sim_->context().engine->Send(cpu.core.unit(), d.depart - now, sender,
                                 std::shared_ptr<const pb::NocAccepted>(accepted));
  }
}

std::string KernelRuntime::NocSendWait(const Instance& inst) const {
  // A diagnostic after the run (the harness reads both ends).
  if (!inst.waiting_send) return "";
  const Cpu& sender = CpuOf(inst.pe);
  auto held = sender.noc_unsent.find(inst.waiting_message);
  if (held == sender.noc_unsent.end()) return "";
  const pb::NocSend& send = *held->second;
  if (send.dst_pe() >= cpu_by_pe_.size() || cpu_by_pe_[send.dst_pe()] == nullptr) return "";
  const Cpu* receiver = cpu_by_pe_[send.dst_pe()];
  if (!receiver->endpoint) return "";
  return absl::StrCat(": message ", send.message_id(), " of ", send.bytes(),
                      " bytes, no receive posted for it and the endpoint queue of ",
                      PeName(send.dst_pe()), " has ", receiver->endpoint->queued_bytes().value(),
                      " of ", receiver->endpoint->queue_bytes().value(), " bytes in use");
}

std::string KernelRuntime::HeadOfLine(const Instance& inst) const {
  if (inst.waiting_on() == 0) return "";
  const Cpu& cpu = CpuOf(inst.pe);
  for (const auto& [key, ch] : cpu.channels) {
    if (ch.messages.empty() || IsFor(ch.messages.front(), inst)) continue;
    for (const PostedRecv& r : ch.recvs) {
      if (r.inst != &inst || r.handle != inst.waiting_on()) continue;
      const IncomingMessage& head = ch.messages.front();
      return absl::StrCat(" behind request ", head.request_id,
                          head.stream != 0 || inst.stream != 0
                              ? absl::StrCat(" stream ", head.stream)
                              : "",
                          "'s message ", head.message_id, " (", head.bytes,
                          " bytes) at the queue head; staging buffer ", cpu.staged_bytes, " of ",
                          kDemuxStagingBytes, " bytes in use");
    }
  }
  return "";
}

void KernelRuntime::RecordSend(const Instance& inst, const Invocation& inv, const std::string& op,
                               uint64_t message_id, uint32_t dst_pe, SimTime issue) {
  observe::OpLog* log = sim_->context().op_log;
  if (log == nullptr) return;
  const uint64_t bytes = inv.payload.bytes();
  const Cpu& cpu = CpuOf(inst.pe);
  pb::IssueRecord issue_rec;
  issue_rec.set_pe(inst.pe);
  issue_rec.set_request_id(inst.request_id());
  issue_rec.set_issue_ps(issue.value());
  pb::LinkChunk* chunk = issue_rec.mutable_send();
  chunk->set_message_id(message_id);
  chunk->set_src_pe(inst.pe);
  chunk->set_dst_pe(dst_pe);
  chunk->set_bytes(bytes);
  chunk->set_request_id(inst.request_id());
  if (inv.call != 0) {
    issue_rec.set_instance(inst.ordinal);
    issue_rec.set_call(inv.call);
  }
  log->AddIssue(std::move(issue_rec));
  pb::OpRecord rec;
  rec.set_unit(cpu.core.unit());
  rec.set_unit_name(sim_->context().Name(cpu.core.unit()));
  rec.set_op(op);
  rec.set_issue_ps(issue.value());
  rec.set_start_ps(issue.value());
  rec.set_end_ps(issue.value());
  rec.set_bytes_written(bytes);
  rec.set_request_id(inst.request_id());
  rec.set_label(absl::StrCat("to pe ", dst_pe, " msg ", message_id));
  rec.set_message_id(message_id);
  if (inv.call != 0) {
    rec.set_instance(inst.ordinal);
    rec.set_call(inv.call);
  }
  log->AddOp(std::move(rec));
}

// ---- sim::CpuRuntime ----

void KernelRuntime::OnIpcqAccepted(sim::PeCpu& core, const pb::IpcqAccepted& accepted) {
  for (Instance* inst : CpuOf(core.pe()).instances) {
    if (inst->waiting() && inst->waiting_send && inst->waiting_message == accepted.message_id()) {
      inst->waiting_send = false;
      core.Wake(*inst, SimTime(accepted.accepted_ps()));
    }
  }
  core.RunReady();
}

void KernelRuntime::OnIpcqArrival(sim::PeCpu& core, const pb::IpcqArrival& arrival) {
  Cpu& cpu = CpuOf(core.pe());
  const uint64_t key = kIpcqChannel | arrival.queue_unit();
  Channel& ch = cpu.channels[key];
  IncomingMessage* msg = nullptr;
  for (IncomingMessage& m : ch.messages) {
    if (m.message_id == arrival.message_id()) msg = &m;
  }
  if (msg == nullptr) {
    msg = &ch.messages.emplace_back();
    msg->message_id = arrival.message_id();
    msg->src_pe = arrival.src_pe();
    msg->request_id = arrival.request_id();
    msg->stream = arrival.stream();
    msg->bytes = arrival.message_bytes();
    msg->elements = Elements(arrival.payload());
    msg->chunks = arrival.chunk_count();
    msg->queue = arrival.queue_unit();
  }
  if (arrival.chunk_index() == 0) msg->values = arrival.values();
  ++msg->arrived;
  msg->arrived_bytes += arrival.bytes();
  msg->last_arrival = Now();
  msg->complete = msg->arrived == msg->chunks;
  // A receive already posted for this (head) message, or staging, pops the new chunk at once.
  PumpChannel(cpu, key);
}

void KernelRuntime::OnNocRoomRequest(sim::PeCpu& core, const pb::NocRoomRequest& request) {
  Cpu& cpu = CpuOf(core.pe());
  const SimTime now = Now();
  const SimTime ready(request.ready_ps());
  const uint64_t id = request.message_id();
  const std::optional<sim::NocEndpointModel::Departure> dep = Endpoint(cpu).Send(
      now, request.src_pe(), NocFlow(request.request_id(), request.stream()), id, ready,
      sim::Bytes(request.bytes()));
  sim::Engine& engine = *sim_->context().engine;
  const sim::UnitId sender =
      index().PeUnit(topology::UnitKind::kPeCpu, index().PeOf(request.src_pe())).value();
  if (dep && dep->depart == ready) {
    // Room at the issue: the answer at once; the sender continues as if it had not stopped.
    auto accepted =
        std::allocate_shared<pb::NocAccepted>(internal::PoolAllocator<pb::NocAccepted>());
    accepted->set_message_id(id);
    accepted->set_accepted_ps(ready.value());
    engine.Send(core.unit(), SimTime(0), sender, std::shared_ptr<const pb::NocAccepted>(accepted));
    return;
  }
  auto held = std::allocate_shared<pb::NocHeld>(internal::PoolAllocator<pb::NocHeld>());
  held->set_message_id(id);
  engine.Send(core.unit(), SimTime(0), sender, std::shared_ptr<const pb::NocHeld>(held));
  cpu.endpoint_blocked[id] = request.src_pe();
  if (dep) ReleaseNoc(cpu, {*dep});
}

void KernelRuntime::OnNocHeld(sim::PeCpu& core, const pb::NocHeld& held) {
  Cpu& cpu = CpuOf(core.pe());
  AHBM_CHECK(cpu.noc_asking == held.message_id())
      << PeName(core.pe()) << ": NocHeld of message " << held.message_id()
      << ", which it did not ask about";
  cpu.noc_asking = 0;
  core.AnswerCame();
  core.RunReady();
}

void KernelRuntime::OnNocAccepted(sim::PeCpu& core, const pb::NocAccepted& accepted) {
  Cpu& cpu = CpuOf(core.pe());
  auto it = cpu.noc_unsent.find(accepted.message_id());
  AHBM_CHECK(it != cpu.noc_unsent.end())
      << PeName(core.pe()) << ": NocAccepted of message " << accepted.message_id()
      << ", which it does not hold";
  const SimTime at(accepted.accepted_ps());
  sim_->context().engine->Send(
      core.unit(), at - Now(), index().NocRouterUnit(index().PeOf(core.pe()).cube_id()).value(),
      it->second);
  cpu.noc_unsent.erase(it);
  for (Instance* inst : cpu.instances) {
    if (inst->waiting() && inst->waiting_send && inst->waiting_message == accepted.message_id()) {
      inst->waiting_send = false;
      core.Wake(*inst, at);
    }
  }
  if (cpu.noc_asking == accepted.message_id()) {
    cpu.noc_asking = 0;
    core.AnswerCame();
  }
  core.RunReady();
}

void KernelRuntime::OnNocDelivered(sim::PeCpu& core, const pb::NocDelivered& delivered) {
  Cpu& cpu = CpuOf(core.pe());
  const uint64_t key = delivered.src_pe();
  IncomingMessage& msg = cpu.channels[key].messages.emplace_back();
  msg.message_id = delivered.message_id();
  msg.src_pe = delivered.src_pe();
  msg.request_id = delivered.request_id();
  msg.stream = delivered.stream();
  msg.bytes = delivered.bytes();
  msg.elements = Elements(delivered.payload());
  msg.chunks = 1;
  msg.arrived = 1;
  msg.complete = true;
  msg.last_arrival = Now();
  msg.values = delivered.values();
  PumpChannel(cpu, key);
}

}  // namespace ahbm::kernels
