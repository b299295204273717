// PeRuntime's messaging (runtime.h's contract): IPCQ and NOC sends, receive posts, the
// matching of arrived messages to receives per channel, and IPCQ demultiplexing staging.
#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "actors/msg.h"
#include "base/check.h"
#include "kernels/runtime/pe_runtime.h"
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

template <typename M>
std::shared_ptr<M> NewMessage() {
  return std::allocate_shared<M>(internal::PoolAllocator<M>());
}

}  // namespace

// ---- calls ----

bool PeRuntime::IssueSend(Instance& inst, const Invocation& inv) {
  const SimTime issue = core_.Charge(core_.profile().send_cycles());
  const uint64_t id = MessageId(pe(), ++messages_sent_);
  // Data mode: the values leave with the message (IpcqSend / NocSend `values`).
  std::string values;
  if (MemoryStore* store = run_.store()) {
    absl::StatusOr<std::vector<float>> read = store->Read(inv.payload.ToRef());
    if (!read.ok()) {
      Fail(inst, absl::StrCat("send payload: ", std::string(read.status().message())));
    }
    values.resize(read->size() * sizeof(float));
    std::memcpy(values.data(), read->data(), values.size());
  }
  return inv.peer->kind() == Peer::Kind::kIpcq
             ? IssueIpcqSend(inst, inv, id, issue, std::move(values))
             : IssueNocSend(inst, inv, id, issue, std::move(values));
}

bool PeRuntime::IssueIpcqSend(Instance& inst, const Invocation& inv, uint64_t id, SimTime issue,
                              std::string values) {
  const Peer& peer = *inv.peer;
  const topology::PeId me = index().PeOf(pe());
  const uint32_t dst = index().GlobalPe(
      topology::PeId{me.sip, me.cube, *index().pe_mesh().Neighbour(me.pe, peer.dir())});
  const sim::UnitId queue = index().IpcqUnit(me, peer.dir()).value();
  // The sender's credit (ipcq_credit.h): pops its receiver has issued count.
  const bool blocks = run_.ipcq_credit().Send(queue, inv.payload.bytes());
  auto send = NewMessage<pb::IpcqSend>();
  send->set_message_id(id);
  send->set_src_pe(pe());
  send->set_dst_pe(dst);
  send->set_bytes(inv.payload.bytes());
  send->set_request_id(inst.request_id());
  send->set_stream(inst.stream);
  send->set_sender_blocks(blocks);  // the queue checks it (actors/README.md, shortcuts)
  inv.payload.WriteTo(*send->mutable_payload());
  send->set_values(std::move(values));
  run_.units().engine->Send(core_.unit(), issue - Now(), queue,
                            std::shared_ptr<const pb::IpcqSend>(send));
  RecordSend(inst, inv, "send_ipcq", id, dst, issue);
  if (!blocks) return true;
  inst.waiting_send = true;
  inst.waiting_message = id;
  inst.waiting_what = {Instance::WaitWhat::Kind::kSend, 0, dst, nullptr, peer};
  core_.WaitEvent(inst, issue);
  return false;
}

bool PeRuntime::IssueNocSend(Instance& inst, const Invocation& inv, uint64_t id, SimTime issue,
                             std::string values) {
  const Peer& peer = *inv.peer;
  if (peer.pe() >= index().num_pes() ||
      index().PeOf(peer.pe()).cube_id() == index().PeOf(pe()).cube_id()) {
    Fail(inst, absl::StrCat("NOC send to pe ", peer.pe(), ": not a PE of another CUBE"));
  }
  // The destination's CPU owns its endpoint (and takes the message).
  if (!run_.RunsKernel(peer.pe())) {
    Fail(inst, absl::StrCat("NOC send to pe ", peer.pe(), ": no kernel instance runs there"));
  }
  auto send = NewMessage<pb::NocSend>();
  send->set_message_id(id);
  send->set_src_pe(pe());
  send->set_dst_pe(peer.pe());
  send->set_bytes(inv.payload.bytes());
  send->set_request_id(inst.request_id());
  send->set_stream(inst.stream);
  inv.payload.WriteTo(*send->mutable_payload());
  send->set_values(std::move(values));
  RecordSend(inst, inv, "send_noc", id, peer.pe(), issue);
  // Ask the destination's CPU for room; the CPU is this instance's until the answer, which
  // comes in this instant (runtime.h, NOC send).
  auto ask = NewMessage<pb::NocRoomRequest>();
  ask->set_message_id(id);
  ask->set_src_pe(pe());
  ask->set_dst_pe(peer.pe());
  ask->set_bytes(inv.payload.bytes());
  ask->set_request_id(inst.request_id());
  ask->set_stream(inst.stream);
  ask->set_ready_ps(issue.value());
  noc_unsent_[id] = std::shared_ptr<const pb::NocSend>(send);
  run_.units().engine->Send(
      core_.unit(), SimTime(0),
      index().PeUnit(topology::UnitKind::kPeCpu, index().PeOf(peer.pe())).value(),
      std::shared_ptr<const pb::NocRoomRequest>(ask));
  inst.waiting_send = true;
  inst.waiting_message = id;
  inst.waiting_what = {Instance::WaitWhat::Kind::kSend, id, peer.pe(), nullptr, peer};
  core_.WaitEvent(inst, issue);
  noc_asking_ = id;
  core_.AwaitAnswer(inst);
  return false;
}

bool PeRuntime::PostRecv(Instance& inst, const Invocation& inv) {
  const SimTime issue = core_.Charge(core_.profile().recv_cycles());
  const uint64_t key = ChannelKey(*inv.peer);
  PostedRecv post;
  post.handle = inv.cmd_id;
  post.inst = &inst;
  post.posted = issue;
  post.dst = inv.result;
  post.call = inv.call;
  channels_[key].recvs.push_back(post);
  if (inv.peer->kind() == Peer::Kind::kPe) {
    // The NOC endpoint learns of the receive: a message waiting for it may leave.
    ReleaseNoc(Endpoint().PostRecv(Now(), inv.peer->pe(),
                                   NocFlow(inst.request_id(), inst.stream), issue));
  }
  if (receive_.size() <= inv.cmd_id) receive_.resize(inv.cmd_id + 1, 0);
  receive_[inv.cmd_id] = 1;
  core_.AddOutstanding(inst, inv.cmd_id);
  NoteWrite(inv, inv.cmd_id);
  PumpChannel(key);
  if (!inv.blocking || core_.IsDone(inv.cmd_id)) return true;
  inst.waiting_what = {Instance::WaitWhat::Kind::kRecv, inv.cmd_id, 0, nullptr, *inv.peer};
  core_.Wait(inst, inv.cmd_id, issue);
  return false;
}

// ---- channels ----

std::string PeRuntime::DescribePeer(const Peer& peer) const {
  if (peer.kind() == Peer::Kind::kIpcq) {
    const topology::PeId me = index().PeOf(pe());
    const std::optional<uint32_t> n = index().pe_mesh().Neighbour(me.pe, peer.dir());
    if (!n) return absl::StrCat("no neighbour to the ", topology::DirName(peer.dir()));
    const topology::PeId src{me.sip, me.cube, *n};
    return absl::StrCat(run_.PeName(index().GlobalPe(src)), " over IPCQ queue ",
                        index().Name(index().IpcqUnit(src, topology::Opposite(peer.dir()))));
  }
  return absl::StrCat(run_.PeName(peer.pe()), " over the NOC");
}

uint64_t PeRuntime::ChannelKey(const Peer& from) const {
  if (from.kind() == Peer::Kind::kIpcq) {
    const topology::PeId me = index().PeOf(pe());
    const std::optional<uint32_t> n = index().pe_mesh().Neighbour(me.pe, from.dir());
    AHBM_CHECK(n.has_value()) << "recv from a missing neighbour";
    const topology::PeId src{me.sip, me.cube, *n};
    // The neighbour's queue towards me points the opposite way.
    const sim::UnitId queue = index().IpcqUnit(src, topology::Opposite(from.dir())).value();
    return kIpcqChannel | queue;
  }
  return from.pe();
}

void PeRuntime::PopArrived(Channel& ch, IncomingMessage& msg, SimTime at) {
  if (msg.arrived_bytes <= msg.popped_bytes) return;
  const SimTime now = Now();
  // The queue's pops stay in time order (the model's rule; also FIFO: none before the previous).
  at = std::max({now, at, ch.last_pop});
  // The pop names the chunks seen to arrive: one arriving before `at` is popped on its own arrival.
  const uint64_t bytes = msg.arrived_bytes - msg.popped_bytes;
  auto pop = NewMessage<pb::IpcqPop>();
  pop->set_message_id(msg.message_id);
  pop->set_bytes(bytes);
  run_.units().engine->Send(core_.unit(), at - now, msg.queue,
                            std::shared_ptr<const pb::IpcqPop>(pop));
  run_.ipcq_credit().Popped(msg.queue, bytes);
  if (msg.popped_bytes == 0) msg.first_pop = at;
  msg.popped_bytes = msg.arrived_bytes;
  msg.last_pop = at;
  ch.last_pop = at;
}

void PeRuntime::Deliver(const IncomingMessage& msg, const PostedRecv& recv, SimTime end,
                        bool staged) {
  // A size mismatch is the receiving kernel's error, in timing mode as in data mode.
  const bool fits = msg.elements == recv.dst.elements();
  if (!fits && recv.inst->error.empty()) {
    recv.inst->error = absl::StrCat(PeName(), ": recv ", recv.handle, " of ",
                                    recv.dst.elements(), " elements got message ", msg.message_id,
                                    " of ", msg.elements, " elements from pe ", msg.src_pe);
  }
  if (MemoryStore* store = run_.store()) {
    std::vector<float> values(msg.values.size() / sizeof(float));
    AHBM_CHECK(values.size() * sizeof(float) == msg.values.size() && values.size() == msg.elements)
        << "message " << msg.message_id << ": " << msg.values.size() << " bytes of values, "
        << msg.elements << " elements";
    std::memcpy(values.data(), msg.values.data(), msg.values.size());
    if (fits) {
      if (absl::Status s = store->Write(recv.dst.ToRef(), values); !s.ok()) {
        recv.inst->error = std::string(s.message());
      }
    }
  }
  if (msg.queue == 0) {
    // NOC: a message taken from the endpoint queue gives its credit back at `end`.
    ReleaseNoc(Endpoint().Consume(Now(), msg.message_id, end));
  }
  if (observe::OpLog* log = run_.units().op_log) {
    pb::OpRecord rec;
    rec.set_unit(core_.unit());
    rec.set_unit_name(run_.units().Name(core_.unit()));
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
}

void PeRuntime::PumpChannel(uint64_t key) {
  Channel& ch = channels_[key];
  const bool ipcq = (key & kIpcqChannel) != 0;
  // One step per pass; a completion may resume kernels that post here again, so each step
  // completes last and the next pass looks again.
  while (true) {
    if (TakeWaitingMessage(ch, ipcq)) continue;
    if (!ipcq || ch.messages.empty()) return;
    const IncomingMessage& head = ch.messages.front();
    auto own = std::find_if(ch.recvs.begin(), ch.recvs.end(),
                            [&](const PostedRecv& r) { return IsFor(head, *r.inst); });
    const bool moved = own != ch.recvs.end() ? StreamHeadToReceive(ch, own) : StageHead(ch);
    if (!moved) return;
  }
}

bool PeRuntime::TakeWaitingMessage(Channel& ch, bool ipcq) {
  std::deque<IncomingMessage>& pool = ipcq ? ch.staged : ch.messages;
  for (auto r = ch.recvs.begin(); r != ch.recvs.end(); ++r) {
    auto m = std::find_if(pool.begin(), pool.end(),
                          [&](const IncomingMessage& x) { return IsFor(x, *r->inst); });
    if (m == pool.end()) continue;
    const SimTime end = std::max({r->posted, m->last_arrival, m->last_pop});
    const uint64_t handle = r->handle;
    Deliver(*m, *r, end, ipcq);
    if (ipcq) staged_bytes_ -= m->bytes;
    pool.erase(m);
    ch.recvs.erase(r);
    core_.Complete(handle, end);
    return true;
  }
  return false;
}

bool PeRuntime::StreamHeadToReceive(Channel& ch, std::deque<PostedRecv>::iterator own) {
  IncomingMessage& head = ch.messages.front();
  // Pop what has arrived (at the post if it lies ahead); later chunks pop on arrival.
  PopArrived(ch, head, own->posted);
  if (!head.complete) return false;
  const SimTime end = std::max({own->posted, head.last_arrival, head.last_pop});
  const uint64_t handle = own->handle;
  Deliver(head, *own, end, false);
  if (head.staging) staged_bytes_ -= head.bytes;
  ch.messages.pop_front();
  ch.recvs.erase(own);
  core_.Complete(handle, end);
  return true;
}

bool PeRuntime::StageHead(Channel& ch) {
  IncomingMessage& head = ch.messages.front();
  if (!head.staging) {
    // Stage only for a waiting receive (of another instance) and only what fits.
    if (ch.recvs.empty() || staged_bytes_ + head.bytes > kDemuxStagingBytes) return false;
    head.staging = true;
    head.stage_from = ch.recvs.front().posted;
    head.stage_for = ch.recvs.front().inst->request_id();
    staged_bytes_ += head.bytes;
  }
  PopArrived(ch, head, head.stage_from);
  if (!head.complete) return false;
  RecordStage(head);
  ch.staged.push_back(std::move(head));
  ch.messages.pop_front();
  return true;
}

void PeRuntime::RecordStage(const IncomingMessage& head) {
  observe::OpLog* log = run_.units().op_log;
  if (log == nullptr) return;
  pb::OpRecord rec;
  rec.set_unit(core_.unit());
  rec.set_unit_name(run_.units().Name(core_.unit()));
  rec.set_op("stage_ipcq");
  rec.set_issue_ps(head.first_pop.value());
  rec.set_start_ps(head.first_pop.value());
  rec.set_end_ps(head.last_pop.value());
  rec.set_bytes_written(head.bytes);
  rec.set_request_id(head.request_id);
  rec.set_label(absl::StrCat("from pe ", head.src_pe, " msg ", head.message_id, " (request ",
                             head.stage_for, " waits)"));
  rec.set_message_id(head.message_id);
  log->AddOp(std::move(rec));
}

sim::NocEndpointModel& PeRuntime::Endpoint() {
  if (!endpoint_) {
    endpoint_.emplace(sim::Bytes(run_.units().chip.sip().noc().endpoint_queue_bytes()));
  }
  return *endpoint_;
}

void PeRuntime::ReleaseNoc(const std::vector<sim::NocEndpointModel::Departure>& deps) {
  const SimTime now = Now();
  for (const sim::NocEndpointModel::Departure& d : deps) {
    auto it = endpoint_blocked_.find(d.message_id);
    AHBM_CHECK(it != endpoint_blocked_.end())
        << PeName() << ": NOC message " << d.message_id << " was not held back";
    auto accepted = NewMessage<pb::NocAccepted>();
    accepted->set_message_id(d.message_id);
    accepted->set_accepted_ps(d.depart.value());
    const sim::UnitId sender =
        index().PeUnit(topology::UnitKind::kPeCpu, index().PeOf(it->second)).value();
    endpoint_blocked_.erase(it);
    run_.units().engine->Send(core_.unit(), d.depart - now, sender,
                              std::shared_ptr<const pb::NocAccepted>(accepted));
  }
}

const pb::NocSend* PeRuntime::UnsentNoc(uint64_t message_id) const {
  auto it = noc_unsent_.find(message_id);
  return it == noc_unsent_.end() ? nullptr : it->second.get();
}

std::string PeRuntime::HeadOfLine(const Instance& inst) const {
  if (inst.waiting_on() == 0) return "";
  for (const auto& [key, ch] : channels_) {
    if (ch.messages.empty() || IsFor(ch.messages.front(), inst)) continue;
    for (const PostedRecv& r : ch.recvs) {
      if (r.inst != &inst || r.handle != inst.waiting_on()) continue;
      const IncomingMessage& head = ch.messages.front();
      return absl::StrCat(" behind request ", head.request_id,
                          head.stream != 0 || inst.stream != 0
                              ? absl::StrCat(" stream ", head.stream)
                              : "",
                          "'s message ", head.message_id, " (", head.bytes,
                          " bytes) at the queue head; staging buffer ", staged_bytes_, " of ",
                          kDemuxStagingBytes, " bytes in use");
    }
  }
  return "";
}

void PeRuntime::RecordSend(const Instance& inst, const Invocation& inv, const std::string& op,
                           uint64_t message_id, uint32_t dst_pe, SimTime issue) {
  observe::OpLog* log = run_.units().op_log;
  if (log == nullptr) return;
  const uint64_t bytes = inv.payload.bytes();
  pb::IssueRecord issue_rec;
  issue_rec.set_pe(pe());
  issue_rec.set_request_id(inst.request_id());
  issue_rec.set_issue_ps(issue.value());
  pb::LinkChunk* chunk = issue_rec.mutable_send();
  chunk->set_message_id(message_id);
  chunk->set_src_pe(pe());
  chunk->set_dst_pe(dst_pe);
  chunk->set_bytes(bytes);
  chunk->set_request_id(inst.request_id());
  if (inv.call != 0) {
    issue_rec.set_instance(inst.ordinal);
    issue_rec.set_call(inv.call);
  }
  log->AddIssue(std::move(issue_rec));
  pb::OpRecord rec;
  rec.set_unit(core_.unit());
  rec.set_unit_name(run_.units().Name(core_.unit()));
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

void PeRuntime::WakeSender(uint64_t message_id, SimTime at) {
  for (const auto& inst : instances_) {
    if (inst->waiting() && inst->waiting_send && inst->waiting_message == message_id) {
      inst->waiting_send = false;
      core_.Wake(*inst, at);
    }
  }
}

void PeRuntime::OnIpcqAccepted(sim::PeCpu&, const pb::IpcqAccepted& accepted) {
  WakeSender(accepted.message_id(), SimTime(accepted.accepted_ps()));
  core_.RunReady();
}

void PeRuntime::OnIpcqArrival(sim::PeCpu&, const pb::IpcqArrival& arrival) {
  const uint64_t key = kIpcqChannel | arrival.queue_unit();
  Channel& ch = channels_[key];
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
  PumpChannel(key);
}

void PeRuntime::OnNocRoomRequest(sim::PeCpu&, const pb::NocRoomRequest& request) {
  const SimTime ready(request.ready_ps());
  const uint64_t id = request.message_id();
  const std::optional<sim::NocEndpointModel::Departure> dep = Endpoint().Send(
      Now(), request.src_pe(), NocFlow(request.request_id(), request.stream()), id, ready,
      sim::Bytes(request.bytes()));
  sim::Engine& engine = *run_.units().engine;
  const sim::UnitId sender =
      index().PeUnit(topology::UnitKind::kPeCpu, index().PeOf(request.src_pe())).value();
  if (dep && dep->depart == ready) {
    // Room at the issue: the answer at once; the sender continues as if it had not stopped.
    auto accepted = NewMessage<pb::NocAccepted>();
    accepted->set_message_id(id);
    accepted->set_accepted_ps(ready.value());
    engine.Send(core_.unit(), SimTime(0), sender,
                std::shared_ptr<const pb::NocAccepted>(accepted));
    return;
  }
  auto held = NewMessage<pb::NocHeld>();
  held->set_message_id(id);
  engine.Send(core_.unit(), SimTime(0), sender, std::shared_ptr<const pb::NocHeld>(held));
  endpoint_blocked_[id] = request.src_pe();
  if (dep) ReleaseNoc({*dep});
}

void PeRuntime::OnNocHeld(sim::PeCpu&, const pb::NocHeld& held) {
  AHBM_CHECK(noc_asking_ == held.message_id())
      << PeName() << ": NocHeld of message " << held.message_id()
      << ", which it did not ask about";
  noc_asking_ = 0;
  core_.AnswerCame();
  core_.RunReady();
}

void PeRuntime::OnNocAccepted(sim::PeCpu&, const pb::NocAccepted& accepted) {
  auto it = noc_unsent_.find(accepted.message_id());
  AHBM_CHECK(it != noc_unsent_.end())
      << PeName() << ": NocAccepted of message " << accepted.message_id()
      << ", which it does not hold";
  const SimTime at(accepted.accepted_ps());
  run_.units().engine->Send(core_.unit(), at - Now(),
                            index().NocRouterUnit(index().PeOf(pe()).cube_id()).value(),
                            it->second);
  noc_unsent_.erase(it);
  WakeSender(accepted.message_id(), at);
  if (noc_asking_ == accepted.message_id()) {
    noc_asking_ = 0;
    core_.AnswerCame();
  }
  core_.RunReady();
}

void PeRuntime::OnNocDelivered(sim::PeCpu&, const pb::NocDelivered& delivered) {
  const uint64_t key = delivered.src_pe();
  IncomingMessage& msg = channels_[key].messages.emplace_back();
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
  PumpChannel(key);
}

}  // namespace ahbm::kernels
