#include "kernels/runtime/tl.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/runtime/instance.h"
#include "kernels/runtime/runtime.h"
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
      throw KernelError(absl::StrCat(rt_->PeName(pe_), ": program_id axis ", axis,
                                     " (0 = PE, 1 = CUBE, 2 = SIP)"));
  }
}

uint32_t Tl::request_id() const { return inst_->request_id(); }

Tensor Tl::Alloc(std::vector<uint64_t> shape, pb::DType dtype, Arena arena) {
  return rt_->Allocate(*inst_, std::move(shape), dtype, arena);
}

Tensor Tl::Ref(uint64_t addr, std::vector<uint64_t> shape, pb::DType dtype,
               std::optional<uint32_t> owner) const {
  pb::TensorRef ref;
  ref.set_space(pb::HBM);
  ref.set_pe(owner.value_or(pe_));
  ref.set_addr(addr);
  ref.set_dtype(dtype);
  for (uint64_t d : shape) ref.add_shape(d);
  return Tensor(std::move(ref), 0);
}

namespace {

// Pending producers of `tensors` on PE `pe` (auto-wait list / scheduler dependencies).
std::vector<uint64_t> PendingOf(KernelRuntime* rt, uint32_t pe,
                                std::initializer_list<const Tensor*> tensors) {
  std::vector<uint64_t> out;
  for (const Tensor* t : tensors) {
    if (t == nullptr || t->producer() == 0 || rt->Done(pe, t->producer())) continue;
    if (std::find(out.begin(), out.end(), t->producer()) == out.end()) out.push_back(t->producer());
  }
  return out;
}

// Scheduler dependencies of a non-blocking command: pending producers of `tensors`, except
// receives still in flight, which go to `held` (the runtime holds the command for them).
template <typename C>
void DependOn(KernelRuntime* rt, uint32_t pe, std::initializer_list<const Tensor*> tensors,
              C& cmd, std::vector<uint64_t>& held) {
  for (uint64_t dep : PendingOf(rt, pe, tensors)) {
    if (!rt->IsReceive(pe, dep)) {
      cmd.add_depends_on(dep);
    } else if (std::find(held.begin(), held.end(), dep) == held.end()) {
      held.push_back(dep);
    }
  }
}

std::shared_ptr<Invocation> NewInvocation(Invocation::Kind kind) {
  auto inv = std::allocate_shared<Invocation>(internal::PoolAllocator<Invocation>());
  inv->kind = kind;
  return inv;
}

void MarkWrite(Invocation& inv, const Tensor& out) {
  if (out.in_hbm()) return;
  inv.written_begin = out.ref().addr();
  inv.written_end = out.ref().addr() + out.bytes();
}

}  // namespace

Call Tl::Load(const Tensor& hbm, Arena arena) {
  if (!hbm.in_hbm()) throw KernelError(absl::StrCat(rt_->PeName(pe_), ": load of a TCM tensor"));
  Tensor dst = Alloc(hbm.shape(), hbm.dtype(), arena);
  auto cmd = std::allocate_shared<pb::DmaCmd>(internal::PoolAllocator<pb::DmaCmd>());
  cmd->set_cmd_id(rt_->NextCmdId(pe_));
  *cmd->mutable_src() = hbm.ref();
  *cmd->mutable_dst() = dst.ref();
  auto inv = NewInvocation(Invocation::Kind::kCommand);
  inv->cmd_id = cmd->cmd_id();
  inv->command = std::shared_ptr<const pb::DmaCmd>(cmd);
  inv->result = Tensor(dst.ref(), cmd->cmd_id());
  MarkWrite(*inv, dst);
  return Call(rt_, inst_, std::move(inv));
}

Call Tl::Store(const Tensor& hbm_dst, const Tensor& src) {
  auto cmd = std::allocate_shared<pb::DmaCmd>(internal::PoolAllocator<pb::DmaCmd>());
  cmd->set_cmd_id(rt_->NextCmdId(pe_));
  *cmd->mutable_src() = src.ref();
  *cmd->mutable_dst() = hbm_dst.ref();
  auto inv = NewInvocation(Invocation::Kind::kCommand);
  inv->cmd_id = cmd->cmd_id();
  inv->command = std::shared_ptr<const pb::DmaCmd>(cmd);
  inv->wait_for = PendingOf(rt_, pe_, {&src});
  inv->result = Tensor(hbm_dst.ref(), 0);
  return Call(rt_, inst_, std::move(inv));
}

Call Tl::Gemm(const Tensor& a, const Tensor& b, std::vector<Epilogue> epilogue,
              std::optional<Tensor> out, bool composite) {
  if (a.rank() != 2 || b.rank() != 2) {
    throw KernelError(absl::StrCat(rt_->PeName(pe_), ": ", composite ? "composite" : "dot",
                                   " needs rank-2 operands (a is ", absl::StrJoin(a.shape(), "x"),
                                   ", b is ", absl::StrJoin(b.shape(), "x"), ")"));
  }
  Tensor dst = out ? *out : Alloc({a.dim(0), b.dim(1)}, pb::FP32, Arena::kScratch);
  const uint64_t id = rt_->NextCmdId(pe_);
  std::shared_ptr<Invocation> inv;
  if (composite) {
    auto cmd = std::allocate_shared<pb::CompositeCmd>(internal::PoolAllocator<pb::CompositeCmd>());
    cmd->set_cmd_id(id);
    *cmd->mutable_a() = a.ref();
    *cmd->mutable_b() = b.ref();
    *cmd->mutable_out() = dst.ref();
    std::vector<const Tensor*> inputs = {&a, &b, &dst};
    for (const Epilogue& e : epilogue) {
      pb::EpilogueStage* s = cmd->add_epilogue();
      s->set_op(e.op);
      s->set_scalar(e.scalar);
      if (e.operand) *s->mutable_operand() = e.operand->ref();
    }
    std::vector<uint64_t> held;
    for (const Tensor* t : inputs) DependOn(rt_, pe_, {t}, *cmd, held);
    for (const Epilogue& e : epilogue) {
      if (!e.operand) continue;
      DependOn(rt_, pe_, {&*e.operand}, *cmd, held);
    }
    inv = NewInvocation(Invocation::Kind::kCommand);
    inv->command = std::shared_ptr<const pb::CompositeCmd>(cmd);
    inv->held_for_recv = std::move(held);
  } else {
    auto cmd = std::allocate_shared<pb::GemmCmd>(internal::PoolAllocator<pb::GemmCmd>());
    cmd->set_cmd_id(id);
    *cmd->mutable_a() = a.ref();
    *cmd->mutable_b() = b.ref();
    *cmd->mutable_out() = dst.ref();
    inv = NewInvocation(Invocation::Kind::kCommand);
    inv->command = std::shared_ptr<const pb::GemmCmd>(cmd);
    inv->wait_for = PendingOf(rt_, pe_, {&a, &b, &dst});
  }
  inv->cmd_id = id;
  inv->result = Tensor(dst.ref(), id);
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
  auto cmd = std::allocate_shared<pb::SoftmaxPvCmd>(internal::PoolAllocator<pb::SoftmaxPvCmd>());
  const uint64_t id = rt_->NextCmdId(pe_);
  cmd->set_cmd_id(id);
  *cmd->mutable_s() = s.ref();
  *cmd->mutable_v() = v.ref();
  *cmd->mutable_acc_m() = acc.m.ref();
  *cmd->mutable_acc_l() = acc.l.ref();
  *cmd->mutable_acc_o() = acc.o.ref();
  cmd->set_scale(scale);
  std::vector<uint64_t> held;
  DependOn(rt_, pe_, {&s, &v, &acc.m, &acc.l}, *cmd, held);
  auto inv = NewInvocation(Invocation::Kind::kCommand);
  inv->held_for_recv = std::move(held);
  inv->cmd_id = id;
  inv->command = std::shared_ptr<const pb::SoftmaxPvCmd>(cmd);
  inv->result = Tensor(acc.o.ref(), id);
  MarkWrite(*inv, acc.o);
  return Call(rt_, inst_, std::move(inv));
}

Call Tl::LseMerge(const Accumulator& acc, const Accumulator& in, const Accumulator& out) {
  auto cmd = std::allocate_shared<pb::LseMergeCmd>(internal::PoolAllocator<pb::LseMergeCmd>());
  const uint64_t id = rt_->NextCmdId(pe_);
  cmd->set_cmd_id(id);
  *cmd->mutable_acc_m() = acc.m.ref();
  *cmd->mutable_acc_l() = acc.l.ref();
  *cmd->mutable_acc_o() = acc.o.ref();
  *cmd->mutable_in_m() = in.m.ref();
  *cmd->mutable_in_l() = in.l.ref();
  *cmd->mutable_in_o() = in.o.ref();
  *cmd->mutable_out_m() = out.m.ref();
  *cmd->mutable_out_l() = out.l.ref();
  *cmd->mutable_out_o() = out.o.ref();
  std::vector<uint64_t> held;
  DependOn(rt_, pe_, {&acc.m, &acc.l, &acc.o, &in.m, &in.l, &in.o, &out.m, &out.l, &out.o}, *cmd,
           held);
  auto inv = NewInvocation(Invocation::Kind::kCommand);
  inv->held_for_recv = std::move(held);
  inv->cmd_id = id;
  inv->command = std::shared_ptr<const pb::LseMergeCmd>(cmd);
  inv->result = Tensor(out.o.ref(), id);
  MarkWrite(*inv, out.o);
  return Call(rt_, inst_, std::move(inv));
}

Call Tl::Math(pb::MathOp op, std::initializer_list<const Tensor*> inputs,
              std::vector<uint64_t> out_shape, std::optional<Tensor> out, int axis, float scalar) {
  Tensor dst = out ? std::move(*out) : Alloc(std::move(out_shape), pb::FP32, Arena::kScratch);
  auto cmd = std::allocate_shared<pb::MathCmd>(internal::PoolAllocator<pb::MathCmd>());
  const uint64_t id = rt_->NextCmdId(pe_);
  cmd->set_cmd_id(id);
  cmd->set_op(op);
  cmd->set_axis(axis);
  cmd->set_scalar(scalar);
  auto inv = NewInvocation(Invocation::Kind::kCommand);
  for (const Tensor* in : inputs) {
    *cmd->add_inputs() = in->ref();
    for (uint64_t dep : PendingOf(rt_, pe_, {in})) inv->wait_for.push_back(dep);
  }
  // Write after write: an output still being produced (e.g. O by a composite) is waited for.
  for (uint64_t dep : PendingOf(rt_, pe_, {&dst})) inv->wait_for.push_back(dep);
  *cmd->mutable_out() = dst.ref();
  inv->cmd_id = id;
  inv->command = std::shared_ptr<const pb::MathCmd>(cmd);
  inv->result = Tensor(dst.ref(), id);
  MarkWrite(*inv, dst);
  return Call(rt_, inst_, std::move(inv));
}

namespace {

std::vector<uint64_t> Reduced(const Tensor& x, int axis) {
  std::vector<uint64_t> shape = x.shape();
  const int a = axis < 0 ? x.rank() + axis : axis;
  if (a < 0 || a >= x.rank()) {
    throw KernelError(absl::StrCat("reduction axis ", axis, " of a rank-", x.rank(), " tensor"));
  }
  shape[a] = 1;
  return shape;
}

std::vector<uint64_t> Broadcast(const Tensor& a, const Tensor& b) {
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
Call Tl::Fill(std::vector<uint64_t> shape, float value, pb::DType dtype, Arena arena) {
  return Math(pb::FILL, {}, {}, Alloc(std::move(shape), dtype, arena), -1, value);
}
Call Tl::FillInto(const Tensor& out, float value) {
  return Math(pb::FILL, {}, {}, out, -1, value);
}
Call Tl::Transpose(const Tensor& x, std::optional<Tensor> out) {
  if (x.rank() != 2) {
    throw KernelError(absl::StrCat(rt_->PeName(pe_), ": transpose of a rank-", x.rank(), " tensor"));
  }
  return Math(pb::TRANSPOSE, {&x}, {x.dim(1), x.dim(0)}, std::move(out));
}

Call Tl::Send(const Peer& to, const Tensor& x) {
  auto inv = NewInvocation(Invocation::Kind::kSend);
  inv->peer = to;
  inv->payload = x;
  inv->wait_for = PendingOf(rt_, pe_, {&x});
  return Call(rt_, inst_, std::move(inv));
}

Call Tl::Recv(const Peer& from, std::vector<uint64_t> shape, pb::DType dtype, Arena arena) {
  return Receive(from, std::move(shape), dtype, arena, /*blocking=*/true);
}

Call Tl::Receive(const Peer& from, std::vector<uint64_t> shape, pb::DType dtype, Arena arena,
                 bool blocking) {
  Tensor dst = Alloc(std::move(shape), dtype, arena);
  auto inv = NewInvocation(Invocation::Kind::kRecv);
  inv->blocking = blocking;
  inv->peer = from;
  inv->cmd_id = rt_->NextCmdId(pe_);
  inv->result = Tensor(dst.ref(), inv->cmd_id);
  MarkWrite(*inv, dst);
  return Call(rt_, inst_, std::move(inv));
}

Call Tl::RecvAsync(const Peer& from, std::vector<uint64_t> shape, pb::DType dtype, Arena arena) {
  return Receive(from, std::move(shape), dtype, arena, /*blocking=*/false);
}

Call Tl::Wait(const Tensor& x) {
  auto inv = NewInvocation(Invocation::Kind::kWait);
  inv->wait_id = x.producer();
  inv->result = Tensor(x.ref(), 0);
  return Call(rt_, inst_, std::move(inv));
}

Call Tl::WaitAll() {
  auto inv = NewInvocation(Invocation::Kind::kWaitAll);
  return Call(rt_, inst_, std::move(inv));
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
      throw KernelError(absl::StrCat(rt_->PeName(pe_), ": no IPCQ neighbour to the ", direction));
    }
    return Peer::Ipcq(*dir);
  }
  if (direction.starts_with("cube_")) {
    const auto dir = dir_of(direction.substr(5));
    std::optional<uint32_t> cube;
    if (dir) cube = index.cube_mesh().Neighbour(me.cube, *dir);
    if (!cube) throw KernelError(absl::StrCat(rt_->PeName(pe_), ": no CUBE to the ", direction));
    return Peer::Pe(index.GlobalPe(topology::PeId{me.sip, *cube, me.pe}));
  }
  if (direction == "global_E" || direction == "global_W") {
    const int64_t sip = static_cast<int64_t>(me.sip) + (direction == "global_E" ? 1 : -1);
    if (sip < 0 || sip >= static_cast<int64_t>(index.sips())) {
      throw KernelError(absl::StrCat(rt_->PeName(pe_), ": no SIP at ", direction));
    }
    return Peer::Pe(index.GlobalPe(topology::PeId{static_cast<uint32_t>(sip), me.cube, me.pe}));
  }
  if (direction == "ring+" || direction == "ring-") {
    const std::vector<uint32_t> ring = rt_->Ring();
    const uint32_t cube = index.GlobalCube(me.cube_id());
    auto it = std::find(ring.begin(), ring.end(), cube);
    if (it == ring.end()) {
      throw KernelError(absl::StrCat(rt_->PeName(pe_), ": CUBE ", cube, " is not on the ring"));
    }
    const size_t i = static_cast<size_t>(it - ring.begin());
    const size_t n = ring.size();
    const uint32_t next = ring[direction == "ring+" ? (i + 1) % n : (i + n - 1) % n];
    const topology::CubeId c = index.CubeOf(next);
    return Peer::Pe(index.GlobalPe(topology::PeId{c.sip, c.cube, me.pe}));
  }
  throw KernelError(absl::StrCat(rt_->PeName(pe_), ": unknown direction '", direction, "'"));
}
}  // namespace ahbm::kernels
