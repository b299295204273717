#include "kernels/runtime/tl.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "actors/message_pool.h"
#include "kernels/runtime/instance.h"
#include "kernels/runtime/pe_runtime.h"
#include "kernels/runtime/task.h"
#include "topology/ids.h"

namespace ahbm::kernels {

uint32_t Tl::program_id(int axis) const {
  const topology::PeId id = rt_->index().PeOf(pe_);
  switch (axis) {
    case 0:
      return id.pe;
    case 1:
      return id.cube;
    case 2:
      return id.sip;
    default:
      throw KernelError(absl::StrCat(rt_->PeName(), ": program_id axis ", axis,
                                     " (0 = PE, 1 = CUBE, 2 = SIP)"));
  }
}

uint32_t Tl::request_id() const { return inst_->request_id(); }

Tensor Tl::Alloc(ShapeArg shape, pb::DType dtype, Arena arena) {
  return rt_->Allocate(*inst_, shape, dtype, arena);
}

Tensor Tl::Ref(uint64_t addr, ShapeArg shape, pb::DType dtype,
               std::optional<uint32_t> owner) const {
  return Tensor(pb::HBM, owner.value_or(pe_), addr, dtype, shape);
}

namespace {

// Calls `f` with each pending producer in `producers` (0: none) on PE `pe`, once each, in
// order (auto-wait list / scheduler dependencies).
template <typename F>
void ForEachPending(PeRuntime* rt, absl::Span<const uint64_t> producers, F f) {
  for (size_t i = 0; i < producers.size(); ++i) {
    const uint64_t p = producers[i];
    if (p == 0 || rt->Done(p)) continue;
    if (std::find(producers.begin(), producers.begin() + i, p) != producers.begin() + i) continue;
    f(p);
  }
}

Handles ProducersOf(std::initializer_list<const Tensor*> tensors) {
  Handles out;
  for (const Tensor* t : tensors) out.push_back(t->producer());
  return out;
}

// Adds the pending ones of `producers` to the call's auto-wait list (and, recording, the group
// to its inputs).
void WaitFor(PeRuntime* rt, absl::Span<const uint64_t> producers,
             Invocation& inv) {
  if (rt->recording()) inv.inputs.push_back({false, Handles(producers.begin(), producers.end())});
  ForEachPending(rt, producers, [&](uint64_t dep) { inv.wait_for.push_back(dep); });
}
void WaitFor(PeRuntime* rt, std::initializer_list<const Tensor*> tensors,
             Invocation& inv) {
  WaitFor(rt, ProducersOf(tensors), inv);
}

// Scheduler dependencies of a non-blocking command: the pending ones of `producers`, except
// receives still in flight, which go to `held` (the runtime holds the command for them);
// recording, the group goes to `inputs`.
template <typename C>
void DependOn(PeRuntime* rt, absl::Span<const uint64_t> producers, C& cmd,
              Handles& held, std::vector<InputLog>& inputs) {
  if (rt->recording()) inputs.push_back({true, Handles(producers.begin(), producers.end())});
  ForEachPending(rt, producers, [&](uint64_t dep) {
    if (!rt->IsReceive(dep)) {
      cmd.add_depends_on(dep);
    } else if (std::find(held.begin(), held.end(), dep) == held.end()) {
      held.push_back(dep);
    }
  });
}
template <typename C>
void DependOn(PeRuntime* rt, std::initializer_list<const Tensor*> tensors,
              C& cmd, Handles& held, std::vector<InputLog>& inputs) {
  DependOn(rt, ProducersOf(tensors), cmd, held, inputs);
}

std::shared_ptr<Invocation> NewInvocation(Invocation::Kind kind) {
  auto inv = std::allocate_shared<Invocation>(internal::PoolAllocator<Invocation>());
  inv->kind = kind;
  return inv;
}

// Command messages are recycled (actors/message_pool.h). Every builder below sets each
// singular TensorRef of its command, so its reset keeps those, cleared, with their dims
// buffers (Clear() alone would free them).
#define AHBM_KEPT(C, field) \
  sim::Kept<C, pb::TensorRef, &C::release_##field, &C::set_allocated_##field>()
void Reuse(pb::DmaCmd& c) {
  sim::ClearKeeping(c, AHBM_KEPT(pb::DmaCmd, src), AHBM_KEPT(pb::DmaCmd, dst));
}
void Reuse(pb::CompositeCmd& c) {
  sim::ClearKeeping(c, AHBM_KEPT(pb::CompositeCmd, a), AHBM_KEPT(pb::CompositeCmd, b),
                    AHBM_KEPT(pb::CompositeCmd, out));
}
void Reuse(pb::GemmCmd& c) {
  sim::ClearKeeping(c, AHBM_KEPT(pb::GemmCmd, a), AHBM_KEPT(pb::GemmCmd, b),
                    AHBM_KEPT(pb::GemmCmd, out));
}
void Reuse(pb::SoftmaxPvCmd& c) {
  sim::ClearKeeping(c, AHBM_KEPT(pb::SoftmaxPvCmd, s), AHBM_KEPT(pb::SoftmaxPvCmd, v),
                    AHBM_KEPT(pb::SoftmaxPvCmd, acc_m), AHBM_KEPT(pb::SoftmaxPvCmd, acc_l),
                    AHBM_KEPT(pb::SoftmaxPvCmd, acc_o));
}
void Reuse(pb::LseMergeCmd& c) {
  sim::ClearKeeping(c, AHBM_KEPT(pb::LseMergeCmd, acc_m), AHBM_KEPT(pb::LseMergeCmd, acc_l),
                    AHBM_KEPT(pb::LseMergeCmd, acc_o), AHBM_KEPT(pb::LseMergeCmd, in_m),
                    AHBM_KEPT(pb::LseMergeCmd, in_l), AHBM_KEPT(pb::LseMergeCmd, in_o),
                    AHBM_KEPT(pb::LseMergeCmd, out_m), AHBM_KEPT(pb::LseMergeCmd, out_l),
                    AHBM_KEPT(pb::LseMergeCmd, out_o));
}
void Reuse(pb::MathCmd& c) { sim::ClearKeeping(c, AHBM_KEPT(pb::MathCmd, out)); }
#undef AHBM_KEPT

struct ResetCommand {
  template <class C>
  void operator()(C& cmd) const {
    Reuse(cmd);
  }
};

// A call's command: its invocation takes it once built.
template <typename C>
std::shared_ptr<C> NewCommand(uint64_t cmd_id) {
  std::shared_ptr<C> cmd =
      sim::MessagePool<C, ResetCommand, internal::PoolAllocator<C>>::Make();
  cmd->set_cmd_id(cmd_id);
  return cmd;
}

// The invocation issuing `cmd`.
template <typename C>
std::shared_ptr<Invocation> CommandInvocation(std::shared_ptr<C> cmd) {
  auto inv = NewInvocation(Invocation::Kind::kCommand);
  inv->cmd_id = cmd->cmd_id();
  inv->command = std::shared_ptr<const C>(std::move(cmd));
  return inv;
}

void MarkWrite(Invocation& inv, const Tensor& out) {
  if (out.in_hbm()) return;
  inv.written_begin = out.addr();
  inv.written_end = out.addr() + out.bytes();
}

}  // namespace

Call Tl::Load(const Tensor& hbm, Arena arena) {
  if (!hbm.in_hbm()) throw KernelError(absl::StrCat(rt_->PeName(), ": load of a TCM tensor"));
  return LoadInto(hbm, Alloc(hbm.shape(), hbm.dtype(), arena));
}

Call Tl::LoadInto(const Tensor& hbm, const Tensor& dst) {
  if (!hbm.in_hbm() || dst.in_hbm()) {
    throw KernelError(absl::StrCat(rt_->PeName(), ": load needs an HBM source and a TCM target"));
  }
  if (hbm.shape() != dst.shape() || hbm.dtype() != dst.dtype()) {
    throw KernelError(
        absl::StrCat(rt_->PeName(), ": load into a buffer of another shape or dtype"));
  }
  auto cmd = NewCommand<pb::DmaCmd>(rt_->NextCmdId());
  hbm.WriteTo(*cmd->mutable_src());
  dst.WriteTo(*cmd->mutable_dst());
  auto inv = CommandInvocation(std::move(cmd));
  inv->result = dst.WithProducer(inv->cmd_id);
  MarkWrite(*inv, dst);
  return Call(rt_, inst_, std::move(inv));
}

Call Tl::Store(const Tensor& hbm_dst, const Tensor& src) {
  auto cmd = NewCommand<pb::DmaCmd>(rt_->NextCmdId());
  src.WriteTo(*cmd->mutable_src());
  hbm_dst.WriteTo(*cmd->mutable_dst());
  auto inv = CommandInvocation(std::move(cmd));
  inv->result = hbm_dst.WithProducer(0);
  WaitFor(rt_, {&src}, *inv);
  return Call(rt_, inst_, std::move(inv));
}

Call Tl::Gemm(const Tensor& a, const Tensor& b, std::vector<Epilogue> epilogue,
              std::optional<Tensor> out, bool composite) {
  if (a.rank() != 2 || b.rank() != 2) {
    throw KernelError(absl::StrCat(rt_->PeName(), ": ", composite ? "composite" : "dot",
                                   " needs rank-2 operands (a is ", absl::StrJoin(a.shape(), "x"),
                                   ", b is ", absl::StrJoin(b.shape(), "x"), ")"));
  }
  const Tensor dst = out ? std::move(*out) : Alloc({a.dim(0), b.dim(1)}, pb::FP32, Arena::kScratch);
  const uint64_t id = rt_->NextCmdId();
  std::shared_ptr<Invocation> inv;
  if (composite) {
    auto cmd = NewCommand<pb::CompositeCmd>(id);
    a.WriteTo(*cmd->mutable_a());
    b.WriteTo(*cmd->mutable_b());
    dst.WriteTo(*cmd->mutable_out());
    for (const Epilogue& e : epilogue) {
      pb::EpilogueStage* s = cmd->add_epilogue();
      s->set_op(e.op);
      s->set_scalar(e.scalar);
      if (e.operand) e.operand->WriteTo(*s->mutable_operand());
    }
    Handles held;
    std::vector<InputLog> inputs;
    for (const Tensor* t : {&a, &b, &dst}) DependOn(rt_, {t}, *cmd, held, inputs);
    for (const Epilogue& e : epilogue) {
      if (e.operand) DependOn(rt_, {&*e.operand}, *cmd, held, inputs);
    }
    inv = CommandInvocation(std::move(cmd));
    inv->held_for_recv = std::move(held);
    inv->inputs = std::move(inputs);
  } else {
    auto cmd = NewCommand<pb::GemmCmd>(id);
    a.WriteTo(*cmd->mutable_a());
    b.WriteTo(*cmd->mutable_b());
    dst.WriteTo(*cmd->mutable_out());
    inv = CommandInvocation(std::move(cmd));
    WaitFor(rt_, {&a, &b, &dst}, *inv);
  }
  inv->result = dst.WithProducer(id);
  MarkWrite(*inv, dst);
  return Call(rt_, inst_, std::move(inv));
}

Call Tl::Composite(const Tensor& a, const Tensor& b, std::vector<Epilogue> epilogue,
                   std::optional<Tensor> out) {
  return Gemm(a, b, std::move(epilogue), std::move(out), true);
}

Call Tl::Dot(const Tensor& a, const Tensor& b, std::optional<Tensor> out) {
  return Gemm(a, b, {}, std::move(out), false);
}

Call Tl::ExComposite(const Tensor& s, const Tensor& v, const Accumulator& acc, float scale) {
  auto cmd = NewCommand<pb::SoftmaxPvCmd>(rt_->NextCmdId());
  s.WriteTo(*cmd->mutable_s());
  v.WriteTo(*cmd->mutable_v());
  acc.m.WriteTo(*cmd->mutable_acc_m());
  acc.l.WriteTo(*cmd->mutable_acc_l());
  acc.o.WriteTo(*cmd->mutable_acc_o());
  cmd->set_scale(scale);
  Handles held;
  std::vector<InputLog> inputs;
  DependOn(rt_, {&s, &v, &acc.m, &acc.l}, *cmd, held, inputs);
  auto inv = CommandInvocation(std::move(cmd));
  inv->result = acc.o.WithProducer(inv->cmd_id);
  inv->held_for_recv = std::move(held);
  inv->inputs = std::move(inputs);
  MarkWrite(*inv, acc.o);
  return Call(rt_, inst_, std::move(inv));
}

Call Tl::LseMerge(const Accumulator& acc, const Accumulator& in, const Accumulator& out) {
  auto cmd = NewCommand<pb::LseMergeCmd>(rt_->NextCmdId());
  acc.m.WriteTo(*cmd->mutable_acc_m());
  acc.l.WriteTo(*cmd->mutable_acc_l());
  acc.o.WriteTo(*cmd->mutable_acc_o());
  in.m.WriteTo(*cmd->mutable_in_m());
  in.l.WriteTo(*cmd->mutable_in_l());
  in.o.WriteTo(*cmd->mutable_in_o());
  out.m.WriteTo(*cmd->mutable_out_m());
  out.l.WriteTo(*cmd->mutable_out_l());
  out.o.WriteTo(*cmd->mutable_out_o());
  Handles held;
  std::vector<InputLog> inputs;
  DependOn(rt_, {&acc.m, &acc.l, &acc.o, &in.m, &in.l, &in.o, &out.m, &out.l, &out.o}, *cmd,
           held, inputs);
  auto inv = CommandInvocation(std::move(cmd));
  inv->result = out.o.WithProducer(inv->cmd_id);
  inv->held_for_recv = std::move(held);
  inv->inputs = std::move(inputs);
  MarkWrite(*inv, out.o);
  return Call(rt_, inst_, std::move(inv));
}

Call Tl::Math(pb::MathOp op, std::initializer_list<const Tensor*> inputs, ShapeArg out_shape,
              std::optional<Tensor> out, int axis, float scalar) {
  const Tensor dst = out ? std::move(*out) : Alloc(out_shape, pb::FP32, Arena::kScratch);
  auto cmd = NewCommand<pb::MathCmd>(rt_->NextCmdId());
  cmd->set_op(op);
  cmd->set_axis(axis);
  cmd->set_scalar(scalar);
  for (const Tensor* in : inputs) in->WriteTo(*cmd->add_inputs());
  dst.WriteTo(*cmd->mutable_out());
  auto inv = CommandInvocation(std::move(cmd));
  inv->result = dst.WithProducer(inv->cmd_id);
  for (const Tensor* in : inputs) WaitFor(rt_, {in}, *inv);
  // Write after write: an output still being produced (e.g. O by a composite) is waited for.
  WaitFor(rt_, {&dst}, *inv);
  MarkWrite(*inv, dst);
  return Call(rt_, inst_, std::move(inv));
}

namespace {

Dims Reduced(const Tensor& x, int axis) {
  Dims shape = x.shape();
  const int a = axis < 0 ? x.rank() + axis : axis;
  if (a < 0 || a >= x.rank()) {
    throw KernelError(absl::StrCat("reduction axis ", axis, " of a rank-", x.rank(), " tensor"));
  }
  shape[a] = 1;
  return shape;
}

const Dims& Broadcast(const Tensor& a, const Tensor& b) {
  return a.elements() >= b.elements() ? a.shape() : b.shape();
}

}  // namespace

Call Tl::Max(const Tensor& x, int axis, std::optional<Tensor> out) {
  return Math(pb::REDUCE_MAX, {&x}, Reduced(x, axis), std::move(out), axis);
}
Call Tl::Sum(const Tensor& x, int axis, std::optional<Tensor> out) {
  return Math(pb::REDUCE_SUM, {&x}, Reduced(x, axis), std::move(out), axis);
}
Call Tl::Exp(const Tensor& x, std::optional<Tensor> out) {
  return Math(pb::EXP, {&x}, x.shape(), std::move(out));
}
Call Tl::Scale(const Tensor& x, float s, std::optional<Tensor> out) {
  return Math(pb::SCALE, {&x}, x.shape(), std::move(out), -1, s);
}
Call Tl::Maximum(const Tensor& a, const Tensor& b, std::optional<Tensor> out) {
  return Math(pb::MAXIMUM, {&a, &b}, Broadcast(a, b), std::move(out));
}
Call Tl::Add(const Tensor& a, const Tensor& b, std::optional<Tensor> out) {
  return Math(pb::ADD, {&a, &b}, Broadcast(a, b), std::move(out));
}
Call Tl::Sub(const Tensor& a, const Tensor& b, std::optional<Tensor> out) {
  return Math(pb::SUB, {&a, &b}, Broadcast(a, b), std::move(out));
}
Call Tl::Mul(const Tensor& a, const Tensor& b, std::optional<Tensor> out) {
  return Math(pb::MUL, {&a, &b}, Broadcast(a, b), std::move(out));
}
Call Tl::Div(const Tensor& a, const Tensor& b, std::optional<Tensor> out) {
  return Math(pb::DIV, {&a, &b}, Broadcast(a, b), std::move(out));
}
Call Tl::Copy(const Tensor& x, std::optional<Tensor> out) {
  return Math(pb::COPY, {&x}, x.shape(), std::move(out));
}
Call Tl::Fill(ShapeArg shape, float value, pb::DType dtype, Arena arena) {
  return Math(pb::FILL, {}, {}, Alloc(shape, dtype, arena), -1, value);
}
Call Tl::FillInto(const Tensor& out, float value) {
  return Math(pb::FILL, {}, {}, out, -1, value);
}
Call Tl::Transpose(const Tensor& x, std::optional<Tensor> out) {
  if (x.rank() != 2) {
    throw KernelError(absl::StrCat(rt_->PeName(), ": transpose of a rank-", x.rank(), " tensor"));
  }
  return Math(pb::TRANSPOSE, {&x}, {x.dim(1), x.dim(0)}, std::move(out));
}

Call Tl::Send(const Peer& to, const Tensor& x) {
  auto inv = NewInvocation(Invocation::Kind::kSend);
  inv->peer = to;
  inv->payload = x;
  WaitFor(rt_, {&x}, *inv);
  return Call(rt_, inst_, std::move(inv));
}

Call Tl::Recv(const Peer& from, ShapeArg shape, pb::DType dtype, Arena arena) {
  return Receive(from, Alloc(shape, dtype, arena), /*blocking=*/true);
}

Call Tl::RecvInto(const Peer& from, const Tensor& dst) {
  return Receive(from, dst, /*blocking=*/true);
}

Call Tl::RecvAsyncInto(const Peer& from, const Tensor& dst) {
  return Receive(from, dst, /*blocking=*/false);
}

Call Tl::Receive(const Peer& from, const Tensor& dst, bool blocking) {
  if (dst.in_hbm()) throw KernelError(absl::StrCat(rt_->PeName(), ": receive into HBM"));
  auto inv = NewInvocation(Invocation::Kind::kRecv);
  inv->blocking = blocking;
  inv->peer = from;
  inv->cmd_id = rt_->NextCmdId();
  inv->result = dst.WithProducer(inv->cmd_id);
  MarkWrite(*inv, dst);
  return Call(rt_, inst_, std::move(inv));
}

Call Tl::RecvAsync(const Peer& from, ShapeArg shape, pb::DType dtype, Arena arena) {
  return Receive(from, Alloc(shape, dtype, arena), /*blocking=*/false);
}

Call Tl::Wait(const Tensor& x) {
  auto inv = NewInvocation(Invocation::Kind::kWait);
  inv->wait_id = x.producer();
  inv->result = x.WithProducer(0);
  return Call(rt_, inst_, std::move(inv));
}

Call Tl::WaitAll() {
  auto inv = NewInvocation(Invocation::Kind::kWaitAll);
  return Call(rt_, inst_, std::move(inv));
}

namespace {

// A recorded group's producers as this run's handles.
Handles HandlesOf(const pb::InputGroup& group, absl::Span<const uint64_t> handles) {
  Handles out;
  for (uint64_t call : group.producers()) out.push_back(call == 0 ? 0 : handles[call]);
  return out;
}

}  // namespace

Call Tl::Replay(pb::CallRecord& r, absl::Span<const uint64_t> handles) {
  const auto peer = [&r] {
    return r.peer_ipcq() ? Peer::Ipcq(static_cast<topology::Dir>(r.peer_dir()))
                         : Peer::Pe(r.peer_pe());
  };
  switch (r.kind()) {
    case pb::CallRecord::SEND: {
      auto inv = NewInvocation(Invocation::Kind::kSend);
      inv->peer = peer();
      uint64_t producer = 0;
      for (const pb::InputGroup& g : r.inputs()) {
        const Handles h = HandlesOf(g, handles);
        if (!h.empty()) producer = h.front();
        WaitFor(rt_, h, *inv);
      }
      inv->payload = Tensor::FromRef(r.tensor(), producer);
      return Call(rt_, inst_, std::move(inv));
    }
    case pb::CallRecord::RECV:
      return Receive(peer(), Tensor::FromRef(r.tensor()), r.blocking());
    case pb::CallRecord::WAIT: {
      auto inv = NewInvocation(Invocation::Kind::kWait);
      inv->wait_id = r.wait_on() == 0 ? 0 : handles[r.wait_on()];
      return Call(rt_, inst_, std::move(inv));
    }
    case pb::CallRecord::WAIT_ALL:
      return WaitAll();
    case pb::CallRecord::COMMAND:
      break;
    default:
      throw KernelError(absl::StrCat(rt_->PeName(), ": call ", r.index(), " of kind ",
                                     pb::CallRecord::Kind_Name(r.kind()), " is not a tl call"));
  }
  const uint64_t id = rt_->NextCmdId();
  // The recorded command under its new id; scheduler groups become depends_on / holds, auto-wait
  // groups the call's auto-waits.
  const auto issue = [&](auto& recorded) {
    using C = std::decay_t<decltype(recorded)>;
    auto cmd = NewCommand<C>(id);
    *cmd = std::move(recorded);
    cmd->set_cmd_id(id);
    Handles held;
    std::vector<InputLog> inputs;
    for (const pb::InputGroup& g : r.inputs()) {
      if (!g.scheduler()) continue;
      if constexpr (requires { cmd->add_depends_on(0); }) {
        DependOn(rt_, HandlesOf(g, handles), *cmd, held, inputs);
      } else {
        throw KernelError(absl::StrCat(rt_->PeName(), ": call ", r.index(),
                                       ": scheduler dependencies on a blocking command"));
      }
    }
    auto inv = CommandInvocation(std::move(cmd));
    inv->held_for_recv = std::move(held);
    inv->inputs = std::move(inputs);
    for (const pb::InputGroup& g : r.inputs()) {
      if (!g.scheduler()) WaitFor(rt_, HandlesOf(g, handles), *inv);
    }
    inv->result = Tensor().WithProducer(id);
    inv->written_begin = r.written_begin();
    inv->written_end = r.written_end();
    return Call(rt_, inst_, std::move(inv));
  };
  switch (r.command_case()) {
    case pb::CallRecord::kDma:
      return issue(*r.mutable_dma());
    case pb::CallRecord::kGemm:
      return issue(*r.mutable_gemm());
    case pb::CallRecord::kMath:
      return issue(*r.mutable_math());
    case pb::CallRecord::kComposite:
      return issue(*r.mutable_composite());
    case pb::CallRecord::kSoftmaxPv:
      return issue(*r.mutable_softmax_pv());
    case pb::CallRecord::kLseMerge:
      return issue(*r.mutable_lse_merge());
    case pb::CallRecord::COMMAND_NOT_SET:
      break;
  }
  throw KernelError(
      absl::StrCat(rt_->PeName(), ": call ", r.index(), ": COMMAND without a command"));
}

Peer Tl::PeerOf(const std::string& direction) const {
  const topology::ChipIndex& index = rt_->index();
  const topology::PeId me = index.PeOf(pe_);
  const auto dir_of = [&](const std::string& d) -> std::optional<topology::Dir> {
    for (topology::Dir dir : topology::kAllDirs) {
      if (d == topology::DirName(dir)) return dir;
    }
    return std::nullopt;
  };
  if (const auto dir = dir_of(direction)) {
    if (!index.pe_mesh().Neighbour(me.pe, *dir)) {
      throw KernelError(absl::StrCat(rt_->PeName(), ": no IPCQ neighbour to the ", direction));
    }
    return Peer::Ipcq(*dir);
  }
  if (direction.starts_with("cube_")) {
    const auto dir = dir_of(direction.substr(5));
    std::optional<uint32_t> cube;
    if (dir) cube = index.cube_mesh().Neighbour(me.cube, *dir);
    if (!cube) throw KernelError(absl::StrCat(rt_->PeName(), ": no CUBE to the ", direction));
    return Peer::Pe(index.GlobalPe(topology::PeId{me.sip, *cube, me.pe}));
  }
  if (direction == "global_E" || direction == "global_W") {
    const int64_t sip = static_cast<int64_t>(me.sip) + (direction == "global_E" ? 1 : -1);
    if (sip < 0 || sip >= static_cast<int64_t>(index.sips())) {
      throw KernelError(absl::StrCat(rt_->PeName(), ": no SIP at ", direction));
    }
    return Peer::Pe(index.GlobalPe(topology::PeId{static_cast<uint32_t>(sip), me.cube, me.pe}));
  }
  if (direction == "ring+" || direction == "ring-") {
    const std::vector<uint32_t> ring = rt_->Ring();
    const uint32_t cube = index.GlobalCube(me.cube_id());
    auto it = std::find(ring.begin(), ring.end(), cube);
    if (it == ring.end()) {
      throw KernelError(absl::StrCat(rt_->PeName(), ": CUBE ", cube, " is not on the ring"));
    }
    const size_t i = static_cast<size_t>(it - ring.begin());
    const size_t n = ring.size();
    const uint32_t next = ring[direction == "ring+" ? (i + 1) % n : (i + n - 1) % n];
    const topology::CubeId c = index.CubeOf(next);
    return Peer::Pe(index.GlobalPe(topology::PeId{c.sip, c.cube, me.pe}));
  }
  throw KernelError(absl::StrCat(rt_->PeName(), ": unknown direction '", direction, "'"));
}
}  // namespace ahbm::kernels
