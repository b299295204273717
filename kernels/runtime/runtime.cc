#include "kernels/runtime/runtime.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "actors/pb_message.h"
#include "actors/tensor_ref.h"
#include "actors/units/ipcq_actor.h"
#include "base/check.h"
#include "caf/atom.hpp"
#include "caf/event_based_actor.hpp"
#include "proto/trace.pb.h"

namespace ahbm::kernels {
namespace {

using kernel_start_atom = caf::atom_constant<caf::atom("kstart")>;
using kernel_check_atom = caf::atom_constant<caf::atom("kcheck")>;
using topology::UnitKind;

constexpr uint64_t kAlign = 64;  // TCM allocations are 64-byte aligned

uint64_t AlignUp(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// Data mode: commands applied to the memory store at completion (sim::DataPlane).
class StoreDataPlane : public sim::DataPlane {
 public:
  explicit StoreDataPlane(DataExecutor* executor) : executor_(executor) {}
  absl::Status Apply(const pb::DmaCmd& cmd) override { return executor_->Execute(cmd); }
  absl::Status Apply(const pb::GemmCmd& cmd) override { return executor_->Execute(cmd); }
  absl::Status Apply(const pb::CompositeCmd& cmd) override { return executor_->Execute(cmd); }
  absl::Status Apply(const pb::MathCmd& cmd) override { return executor_->Execute(cmd); }
  absl::Status Apply(const pb::SoftmaxPvCmd& cmd) override { return executor_->Execute(cmd); }
  absl::Status Apply(const pb::LseMergeCmd& cmd) override { return executor_->Execute(cmd); }

 private:
  DataExecutor* executor_;
};

// The PE CPU actor of a kernel run: every handler forwards to the runtime.
caf::behavior KernelCpuBehavior(caf::event_based_actor*, KernelRuntime* rt, uint32_t pe) {
  return {
      [rt, pe](kernel_start_atom) { rt->OnStart(pe); },
      [rt, pe](kernel_check_atom) { rt->OnCheck(pe); },
      [rt, pe](const std::shared_ptr<const pb::Completion>& m) { rt->OnCompletion(pe, *m); },
      [rt, pe](const std::shared_ptr<const pb::CommandError>& m) { rt->OnCommandError(pe, *m); },
      [rt, pe](const std::shared_ptr<const pb::IpcqAccepted>& m) { rt->OnAccepted(pe, *m); },
      [rt, pe](const std::shared_ptr<const pb::IpcqArrival>& m) { rt->OnArrival(pe, *m); },
      [rt, pe](const std::shared_ptr<const pb::NocDelivered>& m) { rt->OnNocDelivered(pe, *m); },
  };
}

}  // namespace

// ---- Tensor ----

uint64_t Tensor::elements() const { return sim::ElementCount(ref_); }
uint64_t Tensor::bytes() const { return elements() * sim::DTypeBytes(ref_.dtype()); }

Tensor Tensor::View(std::vector<uint64_t> shape) const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  if (ref_.strides_size() > 0) {
    throw KernelError(absl::StrCat("view of a strided tensor (pe ", ref_.pe(), ")"));
  }
  if (n != elements()) {
    throw KernelError(absl::StrCat("view: ", elements(), " elements cannot be viewed as ",
                                   absl::StrJoin(shape, "x"), " (pe ", ref_.pe(), ")"));
  }
  pb::TensorRef ref = ref_;
  ref.clear_shape();
  for (uint64_t d : shape) ref.add_shape(d);
  return Tensor(std::move(ref), producer_);
}

Tensor Tensor::Rows(uint64_t row, uint64_t rows) const {
  if (rank() != 2 || row + rows > dim(0) || rows == 0) {
    throw KernelError(absl::StrCat("rows [", row, ", ", row + rows, ") of a tensor of shape ",
                                   absl::StrJoin(shape(), "x"), " (pe ", ref_.pe(), ")"));
  }
  const uint64_t s0 = ref_.strides_size() == 2 ? ref_.strides(0) : dim(1);
  const uint64_t s1 = ref_.strides_size() == 2 ? ref_.strides(1) : 1;
  pb::TensorRef ref = ref_;
  ref.set_addr(ref_.addr() + row * s0 * sim::DTypeBytes(dtype()));
  ref.set_shape(0, rows);
  if (ref_.strides_size() == 2) {
    ref.set_strides(0, s0);
    ref.set_strides(1, s1);
  }
  return Tensor(std::move(ref), producer_);
}

Tensor Tensor::Cols(uint64_t col, uint64_t cols) const {
  if (rank() != 2 || col + cols > dim(1) || cols == 0) {
    throw KernelError(absl::StrCat("columns [", col, ", ", col + cols, ") of a tensor of shape ",
                                   absl::StrJoin(shape(), "x"), " (pe ", ref_.pe(), ")"));
  }
  const uint64_t s0 = ref_.strides_size() == 2 ? ref_.strides(0) : dim(1);
  const uint64_t s1 = ref_.strides_size() == 2 ? ref_.strides(1) : 1;
  if (col == 0 && cols == dim(1)) return *this;
  pb::TensorRef ref = ref_;
  ref.set_addr(ref_.addr() + col * s1 * sim::DTypeBytes(dtype()));
  ref.set_shape(1, cols);
  ref.clear_strides();
  ref.add_strides(s0);
  ref.add_strides(s1);
  return Tensor(std::move(ref), producer_);
}

// ---- Call ----

Call::Call(KernelRuntime* runtime, Instance* instance, std::shared_ptr<Invocation> invocation)
    : runtime_(runtime), instance_(instance), invocation_(std::move(invocation)) {}

bool Call::await_suspend(std::coroutine_handle<> handle) {
  return runtime_->Submit(*instance_, invocation_, handle);
}

Tensor Call::await_resume() {
  if (!instance_->error.empty()) throw KernelError(instance_->error);
  return invocation_->result;
}

// ---- ScratchScope ----

ScratchScope::ScratchScope(Tl* tl) : tl_(tl), mark_(tl->runtime()->ScratchTop(*tl->instance())) {}

ScratchScope::~ScratchScope() { tl_->runtime()->LeaveScope(*tl_->instance(), mark_); }

// ---- Tl ----

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

uint32_t Tl::request_id() const { return inst_->request_id; }

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

// ChannelKey: IPCQ queues above every NOC source PE.
constexpr uint64_t kIpcqChannel = uint64_t{1} << 32;

// Pending TCM writes by handle, ascending (a map's order, without a node per command).
using Writes = std::vector<std::pair<uint64_t, std::pair<uint64_t, uint64_t>>>;

void SetWrite(Writes& w, uint64_t h, uint64_t begin, uint64_t end) {
  auto it = std::lower_bound(w.begin(), w.end(), h,
                             [](const auto& x, uint64_t key) { return x.first < key; });
  if (it != w.end() && it->first == h) {
    it->second = {begin, end};
  } else {
    w.insert(it, {h, {begin, end}});
  }
}

void EraseWrite(Writes& w, uint64_t h) {
  auto it = std::lower_bound(w.begin(), w.end(), h,
                             [](const auto& x, uint64_t key) { return x.first < key; });
  if (it != w.end() && it->first == h) w.erase(it);
}

std::shared_ptr<Invocation> NewCommand(std::string what, bool blocking, uint32_t cost) {
  auto inv = std::allocate_shared<Invocation>(internal::PoolAllocator<Invocation>());
  inv->kind = Invocation::Kind::kCommand;
  inv->what = std::move(what);
  inv->blocking = blocking;
  inv->cost_cycles = cost;
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
  auto inv = NewCommand("load", false, rt_->profile().load_cycles());
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
  auto inv = NewCommand("store", true, rt_->profile().store_cycles());
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
    inv = NewCommand("composite", false, rt_->profile().composite_cycles());
    inv->command = std::shared_ptr<const pb::CompositeCmd>(cmd);
    inv->held_for_recv = std::move(held);
  } else {
    auto cmd = std::allocate_shared<pb::GemmCmd>(internal::PoolAllocator<pb::GemmCmd>());
    cmd->set_cmd_id(id);
    *cmd->mutable_a() = a.ref();
    *cmd->mutable_b() = b.ref();
    *cmd->mutable_out() = dst.ref();
    inv = NewCommand("dot", true, rt_->profile().dot_cycles());
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
  auto inv = NewCommand("ex_composite", false, rt_->profile().ex_composite_cycles());
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
  auto inv = NewCommand("lse_merge", false, rt_->profile().ex_composite_cycles());
  inv->held_for_recv = std::move(held);
  inv->cmd_id = id;
  inv->command = std::shared_ptr<const pb::LseMergeCmd>(cmd);
  inv->result = Tensor(out.o.ref(), id);
  MarkWrite(*inv, out.o);
  return Call(rt_, inst_, std::move(inv));
}

Call Tl::Math(pb::MathOp op, std::vector<Tensor> inputs, std::vector<uint64_t> out_shape,
              std::optional<Tensor> out, int axis, float scalar) {
  Tensor dst = out ? *out : Alloc(std::move(out_shape), pb::FP32, Arena::kScratch);
  auto cmd = std::allocate_shared<pb::MathCmd>(internal::PoolAllocator<pb::MathCmd>());
  const uint64_t id = rt_->NextCmdId(pe_);
  cmd->set_cmd_id(id);
  cmd->set_op(op);
  cmd->set_axis(axis);
  cmd->set_scalar(scalar);
  auto inv = NewCommand(absl::StrCat("math_", pb::MathOp_Name(op)), true,
                        rt_->profile().primitive_cycles());
  for (const Tensor& in : inputs) {
    *cmd->add_inputs() = in.ref();
    for (uint64_t dep : PendingOf(rt_, pe_, {&in})) inv->wait_for.push_back(dep);
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
  return Math(pb::REDUCE_MAX, {x}, Reduced(x, axis), std::move(out), axis);
}
Call Tl::Sum(const Tensor& x, int axis, std::optional<Tensor> out) {
  return Math(pb::REDUCE_SUM, {x}, Reduced(x, axis), std::move(out), axis);
}
Call Tl::Exp(const Tensor& x, std::optional<Tensor> out) {
  return Math(pb::EXP, {x}, x.shape(), std::move(out));
}
Call Tl::Scale(const Tensor& x, float s, std::optional<Tensor> out) {
  return Math(pb::SCALE, {x}, x.shape(), std::move(out), -1, s);
}
Call Tl::Maximum(const Tensor& a, const Tensor& b, std::optional<Tensor> out) {
  return Math(pb::MAXIMUM, {a, b}, Broadcast(a, b), std::move(out));
}
Call Tl::Add(const Tensor& a, const Tensor& b, std::optional<Tensor> out) {
  return Math(pb::ADD, {a, b}, Broadcast(a, b), std::move(out));
}
Call Tl::Sub(const Tensor& a, const Tensor& b, std::optional<Tensor> out) {
  return Math(pb::SUB, {a, b}, Broadcast(a, b), std::move(out));
}
Call Tl::Mul(const Tensor& a, const Tensor& b, std::optional<Tensor> out) {
  return Math(pb::MUL, {a, b}, Broadcast(a, b), std::move(out));
}
Call Tl::Div(const Tensor& a, const Tensor& b, std::optional<Tensor> out) {
  return Math(pb::DIV, {a, b}, Broadcast(a, b), std::move(out));
}
Call Tl::Copy(const Tensor& x, std::optional<Tensor> out) {
  return Math(pb::COPY, {x}, x.shape(), std::move(out));
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
  return Math(pb::TRANSPOSE, {x}, {x.dim(1), x.dim(0)}, std::move(out));
}

Call Tl::Send(const Peer& to, const Tensor& x) {
  auto inv = std::allocate_shared<Invocation>(internal::PoolAllocator<Invocation>());
  inv->kind = Invocation::Kind::kSend;
  inv->what = "send";
  inv->cost_cycles = rt_->profile().send_cycles();
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
  auto inv = std::allocate_shared<Invocation>(internal::PoolAllocator<Invocation>());
  inv->kind = Invocation::Kind::kRecv;
  inv->what = blocking ? "recv" : "recv_async";
  inv->blocking = blocking;
  inv->cost_cycles = rt_->profile().recv_cycles();
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
  auto inv = std::allocate_shared<Invocation>(internal::PoolAllocator<Invocation>());
  inv->kind = Invocation::Kind::kWait;
  inv->what = "wait";
  inv->blocking = true;
  inv->wait_id = x.producer();
  inv->result = Tensor(x.ref(), 0);
  return Call(rt_, inst_, std::move(inv));
}

Call Tl::WaitAll() {
  auto inv = std::allocate_shared<Invocation>(internal::PoolAllocator<Invocation>());
  inv->kind = Invocation::Kind::kWaitAll;
  inv->what = "wait_all";
  inv->blocking = true;
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

// ---- KernelRuntime ----

KernelRuntime::KernelRuntime(sim::ChipSim* sim, MemoryStore* store) : sim_(sim), store_(store) {
  sim::UnitContext& ctx = sim_->context();
  const pb::IssueCostProfile* profile = sim::FindIssueCostProfile(ctx.chip, ctx.issue_cost_profile);
  AHBM_CHECK(profile != nullptr) << "no issue cost profile " << ctx.issue_cost_profile;
  profile_ = *profile;
  clock_ = *sim::ClockDomain::FromMHz(ctx.chip.sip().cube().pe().clock_mhz());
  ipcq_queue_bytes_ = ctx.chip.sip().cube().ipcq().queue_bytes();
  if (store_ != nullptr) {
    executor_.emplace(store_);
    data_plane_ = std::make_unique<StoreDataPlane>(&*executor_);
    ctx.data = data_plane_.get();
  }
}

KernelRuntime::~KernelRuntime() {
  sim_->context().data = nullptr;
  // Shut the engine down before the instances (and their coroutine frames) go away.
  sim_->engine().Shutdown();
}

std::string KernelRuntime::PeName(uint32_t pe) const {
  const std::string cpu = index().Name(index().PeUnit(UnitKind::kPeCpu, index().PeOf(pe)));
  return absl::StrCat("pe ", pe, " (", cpu.substr(0, cpu.rfind('.')), ")");
}

SimTime KernelRuntime::Now() const { return sim_->context().engine->now(); }

absl::Status KernelRuntime::AddKernel(uint32_t pe, uint32_t request_id, KernelFn fn) {
  if (ran_) return absl::FailedPreconditionError("AddKernel after Run");
  if (!cpus_.contains(pe)) {
    if (absl::Status s = sim_->ClaimCpu(pe); !s.ok()) return s;
    Cpu& cpu = cpus_[pe];
    if (cpu_by_pe_.size() <= pe) cpu_by_pe_.resize(pe + 1, nullptr);
    cpu_by_pe_[pe] = &cpu;
    cpu.pe = pe;
    cpu.unit = index().PeUnit(UnitKind::kPeCpu, index().PeOf(pe)).value();
    cpu.scheduler = index().PeUnit(UnitKind::kPeScheduler, index().PeOf(pe)).value();
    cpu.persistent_top = sim_->context().chip.sip().cube().pe().tcm().scratch_bytes();
    cpu.persistent_limit = sim_->context().chip.sip().cube().pe().tcm().total_bytes();
    sim::Engine& engine = *sim_->context().engine;
    engine.Register(cpu.unit, sim_->context().Name(cpu.unit),
                    engine.system().spawn(KernelCpuBehavior, this, pe));
    engine.Send(cpu.unit, SimTime(0), cpu.unit, kernel_start_atom::value);
  }
  auto inst = std::make_unique<Instance>();
  inst->pe = pe;
  inst->request_id = request_id;
  inst->order = static_cast<uint32_t>(instances_.size());
  inst->tl = std::make_unique<Tl>(this, inst.get(), pe);
  inst->fn = std::move(fn);
  inst->task.emplace(inst->fn(*inst->tl));
  cpus_[pe].instances.push_back(inst.get());
  instances_.push_back(std::move(inst));
  return absl::OkStatus();
}

absl::Status KernelRuntime::Run() {
  AHBM_CHECK(!ran_) << "KernelRuntime::Run twice";
  ran_ = true;
  const uint64_t scratch = sim_->context().chip.sip().cube().pe().tcm().scratch_bytes();
  for (auto& [pe, cpu] : cpus_) {
    const uint64_t n = cpu.instances.size();
    // Several requests on this PE: the IPCQ staging buffer takes the top of TCM.
    for (const Instance* inst : cpu.instances) {
      if (inst->request_id != cpu.instances.front()->request_id) {
        cpu.persistent_limit -= std::min(cpu.persistent_limit, kDemuxStagingBytes);
        break;
      }
    }
    for (uint64_t i = 0; i < n; ++i) {
      Instance& inst = *cpu.instances[i];
      inst.scratch_base = AlignUp(scratch * i / n);
      inst.scratch_limit = scratch * (i + 1) / n;
      inst.scratch_top = inst.scratch_base;
    }
  }
  absl::Status status = sim_->Run();
  if (!status.ok()) return status;
  std::vector<std::string> waits;
  for (const auto& inst : instances_) {
    if (inst->state != Instance::State::kDone) waits.push_back(Describe(*inst) + HeadOfLine(*inst));
  }
  if (!waits.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("deadlock: no event left; ", absl::StrJoin(waits, "; ")));
  }
  return absl::OkStatus();
}

std::string KernelRuntime::Describe(const Instance& inst) const {
  std::string what = inst.waiting_what.empty() ? "nothing (never ran)" : WaitText(inst);
  return absl::StrCat(PeName(inst.pe), " request ", inst.request_id, " waits on ", what);
}

void KernelRuntime::Fail(Instance& inst, const std::string& reason) {
  throw KernelError(absl::StrCat(PeName(inst.pe), ": ", reason));
}

Tensor KernelRuntime::Allocate(Instance& inst, std::vector<uint64_t> shape, pb::DType dtype,
                               Arena arena) {
  Cpu& cpu = CpuOf(inst.pe);
  const pb::Tcm& tcm = sim_->context().chip.sip().cube().pe().tcm();
  uint64_t bytes = sim::DTypeBytes(dtype);
  for (uint64_t d : shape) bytes *= d;
  if (bytes == 0) Fail(inst, absl::StrCat("allocation of an empty tensor ", absl::StrJoin(shape, "x")));
  uint64_t& top = arena == Arena::kScratch ? inst.scratch_top : cpu.persistent_top;
  const uint64_t base = arena == Arena::kScratch ? inst.scratch_base : tcm.scratch_bytes();
  const uint64_t limit = arena == Arena::kScratch ? inst.scratch_limit : cpu.persistent_limit;
  const uint64_t at = AlignUp(top);
  if (at + bytes > limit) {
    Fail(inst, absl::StrCat(arena == Arena::kScratch ? "scratch" : "persistent",
                            " arena overflow: ", bytes, " bytes needed, ", at - base, " of ",
                            limit - base, " bytes in use"));
  }
  top = at + bytes;
  pb::TensorRef ref;
  ref.set_space(pb::TCM);
  ref.set_pe(inst.pe);
  ref.set_addr(at);
  ref.set_dtype(dtype);
  for (uint64_t d : shape) ref.add_shape(d);
  return Tensor(std::move(ref), 0);
}

void KernelRuntime::LeaveScope(Instance& inst, uint64_t mark) {
  Cpu& cpu = CpuOf(inst.pe);
  // A pending write into the released part [mark, scratch_top) of the scratch arena.
  for (const auto& [handle, range] : cpu.writes) {
    if (range.first < inst.scratch_top && range.second > mark) {
      if (inst.error.empty()) {
        inst.error = absl::StrCat(PeName(inst.pe), ": leaving scratch_scope while cmd ", handle,
                                  " still writes TCM [", range.first, ", ", range.second, ")");
      }
    }
  }
  inst.scratch_top = std::min(inst.scratch_top, mark);
}

void KernelRuntime::RecordSend(const Instance& inst, const std::string& op, uint64_t message_id,
                               uint32_t dst_pe, uint64_t bytes, SimTime issue) {
  observe::OpLog* log = sim_->context().op_log;
  if (log == nullptr) return;
  const Cpu& cpu = CpuOf(inst.pe);
  pb::IssueRecord issue_rec;
  issue_rec.set_pe(inst.pe);
  issue_rec.set_request_id(inst.request_id);
  issue_rec.set_issue_ps(issue.value());
  pb::LinkChunk* chunk = issue_rec.mutable_send();
  chunk->set_message_id(message_id);
  chunk->set_src_pe(inst.pe);
  chunk->set_dst_pe(dst_pe);
  chunk->set_bytes(bytes);
  chunk->set_request_id(inst.request_id);
  log->AddIssue(std::move(issue_rec));
  pb::OpRecord rec;
  rec.set_unit(cpu.unit);
  rec.set_unit_name(sim_->context().Name(cpu.unit));
  rec.set_op(op);
  rec.set_issue_ps(issue.value());
  rec.set_start_ps(issue.value());
  rec.set_end_ps(issue.value());
  rec.set_bytes_written(bytes);
  rec.set_request_id(inst.request_id);
  rec.set_label(absl::StrCat("to pe ", dst_pe, " msg ", message_id));
  log->AddOp(std::move(rec));
}

void KernelRuntime::IssueStats(uint32_t pe, SimTime cost) {
  pb::UnitStats& s = sim_->context().stats.At(CpuOf(pe).unit);
  s.set_ops(s.ops() + 1);
  s.set_busy_ps(s.busy_ps() + cost.value());
}

bool KernelRuntime::Submit(Instance& inst, std::shared_ptr<Invocation> inv,
                           std::coroutine_handle<> h) {
  inst.resume = h;
  inst.pending = std::move(inv);
  return !TryIssue(inst);
}

std::string KernelRuntime::WaitText(const Instance& inst) const {
  const Instance::WaitWhat& w = inst.waiting_what;
  using K = Instance::WaitWhat::Kind;
  switch (w.kind) {
    case K::kNone:
      return "";
    case K::kAutoWait:
      return absl::StrCat("cmd ", w.id, " (auto-wait before ", w.what, ")");
    case K::kWait:
      return absl::StrCat("cmd ", w.id, " (wait)");
    case K::kAll:
      return absl::StrCat("all commands (wait; ", w.count, " pending, first cmd ", w.id, ")");
    case K::kCmd:
      return absl::StrCat("cmd ", w.id, " (", w.what, ")");
    case K::kSend:
      return absl::StrCat("send to pe ", w.count, " (IPCQ ", topology::DirName(w.peer.dir()),
                          " queue has no credit)");
    case K::kRecv:
      return absl::StrCat("recv ", w.id, " from ", DescribePeer(inst.pe, w.peer));
  }
  return "";
}

void KernelRuntime::Wait(Instance& inst, uint64_t handle, Instance::WaitWhat what, SimTime from,
                         bool cost) {
  inst.state = Instance::State::kWaiting;
  inst.waiting_on = handle;
  inst.waiting_what = std::move(what);
  inst.wait_from = from;
  inst.real_wait_cost = cost;
  Cpu& cpu = CpuOf(inst.pe);
  // The CPU ran ahead of the event clock: whether this wait is real is known only at `from`;
  // do not hand the CPU to another instance before then.
  if (from > Now()) {
    for (Instance* other : cpu.instances) {
      if (other != &inst && (other->state == Instance::State::kReady ||
                             other->state == Instance::State::kNew)) {
        cpu.hold_until = from;
        cpu.holder = &inst;
        sim_->context().engine->Send(cpu.unit, from - Now(), cpu.unit, kernel_check_atom::value);
        break;
      }
    }
  }
}

bool KernelRuntime::TryIssue(Instance& inst) {
  Cpu& cpu = CpuOf(inst.pe);
  Invocation& inv = *inst.pending;
  const SimTime now = Now();
  if (!inst.error.empty()) throw KernelError(inst.error);
  using WaitKind = Instance::WaitWhat::Kind;
  for (uint64_t h : inv.wait_for) {
    if (cpu.IsDone(h)) continue;
    Instance::WaitWhat w;
    w.kind = WaitKind::kAutoWait;
    w.id = h;
    w.what = inv.what;
    Wait(inst, h, std::move(w), std::max(cpu.cpu, now), true);
    return false;
  }
  switch (inv.kind) {
    case Invocation::Kind::kWait:
      if (inv.wait_id == 0 || cpu.IsDone(inv.wait_id)) {
        inst.pending.reset();
        return true;
      } else {
        Instance::WaitWhat w;
        w.kind = WaitKind::kWait;
        w.id = inv.wait_id;
        Wait(inst, inv.wait_id, std::move(w), std::max(cpu.cpu, now), true);
      }
      return false;
    case Invocation::Kind::kWaitAll:
      if (inst.outstanding == 0) {
        inst.pending.reset();
        return true;
      }
      {
        Instance::WaitWhat w;
        w.kind = WaitKind::kAll;
        w.count = inst.outstanding;
        for (uint64_t h = 0; h < cpu.handles.size(); ++h) {  // the first outstanding handle
          if (cpu.handles[h].owner == &inst) {
            w.id = h;
            break;
          }
        }
        Wait(inst, 0, std::move(w), std::max(cpu.cpu, now), true);
      }
      inst.waiting_all = true;
      return false;
    default:
      break;
  }
  const SimTime start = Edge(std::max(cpu.cpu, now));
  const SimTime issue = start + CyclesTime(inv.cost_cycles);
  IssueStats(inst.pe, issue - start);
  cpu.cpu = issue;
  sim::Engine& engine = *sim_->context().engine;
  // `inv` stays valid after pending is reset: the awaiting Call owns the invocation too.
  const std::shared_ptr<Invocation> keep = inst.pending;
  inst.pending.reset();

  if (inv.kind == Invocation::Kind::kCommand) {
    // Inputs still in a posted receive: hand the command over when they have completed.
    HeldCommand held;
    held.hand = issue;
    for (uint64_t h : inv.held_for_recv) {
      if (cpu.IsDone(h)) {
        held.hand = std::max(held.hand, cpu.DoneAt(h));
      } else {
        held.receives.insert(h);
      }
    }
    if (!cpu.held.empty()) {
      // Behind a held command it depends on (the scheduler must have seen it first).
      std::visit(
          [&](const auto& c) {
            using T = std::decay_t<decltype(*c)>;
            if constexpr (std::is_same_v<T, pb::CompositeCmd> ||
                          std::is_same_v<T, pb::SoftmaxPvCmd> ||
                          std::is_same_v<T, pb::LseMergeCmd>) {
              for (uint64_t d : c->depends_on()) {
                for (const HeldCommand& x : cpu.held) {
                  if (x.cmd_id == d) held.commands.insert(d);
                }
              }
            }
            if constexpr (std::is_same_v<T, pb::SoftmaxPvCmd>) {
              held.acc = absl::StrCat(c->acc_o().pe(), "@", c->acc_o().addr());
              for (const HeldCommand& x : cpu.held) {
                if (x.acc == held.acc) held.commands.insert(x.cmd_id);
              }
            }
          },
          inv.command);
    }
    if (held.receives.empty() && held.commands.empty()) {
      std::visit(
          [&](const auto& c) { engine.Send(cpu.unit, held.hand - now, cpu.scheduler, c); },
          inv.command);
    } else {
      held.command = inv.command;
      held.cmd_id = inv.cmd_id;
      if (held.acc.empty()) {
        if (const auto* pv = std::get_if<std::shared_ptr<const pb::SoftmaxPvCmd>>(&inv.command)) {
          held.acc = absl::StrCat((*pv)->acc_o().pe(), "@", (*pv)->acc_o().addr());
        }
      }
      cpu.held.push_back(std::move(held));
    }
    if (observe::OpLog* log = sim_->context().op_log) {
      pb::IssueRecord rec;
      rec.set_pe(inst.pe);
      rec.set_request_id(inst.request_id);
      rec.set_cmd_id(inv.cmd_id);
      rec.set_issue_ps(issue.value());
      rec.set_blocking(inv.blocking);
      for (uint64_t d : inv.wait_for) rec.add_depends_on(d);
      for (uint64_t d : inv.held_for_recv) rec.add_recv_depends_on(d);
      std::visit(
          [&](const auto& c) {
            using T = std::decay_t<decltype(*c)>;
            if constexpr (std::is_same_v<T, pb::DmaCmd>) *rec.mutable_dma() = *c;
            if constexpr (std::is_same_v<T, pb::CompositeCmd>) {
              *rec.mutable_composite() = *c;
              for (uint64_t d : c->depends_on()) rec.add_depends_on(d);
            }
            if constexpr (std::is_same_v<T, pb::SoftmaxPvCmd>) {
              *rec.mutable_softmax_pv() = *c;
              for (uint64_t d : c->depends_on()) rec.add_depends_on(d);
            }
            if constexpr (std::is_same_v<T, pb::LseMergeCmd>) {
              *rec.mutable_lse_merge() = *c;
              for (uint64_t d : c->depends_on()) rec.add_depends_on(d);
            }
            if constexpr (std::is_same_v<T, pb::GemmCmd>) *rec.mutable_gemm() = *c;
            if constexpr (std::is_same_v<T, pb::MathCmd>) *rec.mutable_math() = *c;
          },
          inv.command);
      log->AddIssue(std::move(rec));
    }
    AddOutstanding(cpu, inst, inv.cmd_id);
    if (inv.written_end > inv.written_begin) {
      SetWrite(cpu.writes, inv.cmd_id, inv.written_begin, inv.written_end);
    }
    if (!inv.blocking) return true;
    Instance::WaitWhat w;
    w.kind = WaitKind::kCmd;
    w.id = inv.cmd_id;
    w.what = inv.what;
    Wait(inst, inv.cmd_id, std::move(w), issue, true);
    return false;
  }

  if (inv.kind == Invocation::Kind::kSend) {
    const uint64_t id = next_message_++;
    const Peer& peer = *inv.peer;
    if (store_ != nullptr) {
      absl::StatusOr<std::vector<float>> values = store_->Read(inv.payload.ref());
      if (!values.ok()) Fail(inst, absl::StrCat("send payload: ", std::string(values.status().message())));
      payloads_[id] = std::vector<uint8_t>();
      std::vector<uint8_t>& bytes = payloads_[id];
      bytes.resize(values->size() * sizeof(float));
      std::memcpy(bytes.data(), values->data(), bytes.size());
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
      send->set_request_id(inst.request_id);
      *send->mutable_payload() = inv.payload.ref();
      engine.Send(cpu.unit, issue - now, queue, std::shared_ptr<const pb::IpcqSend>(send));
      RecordSend(inst, "send_ipcq", id, dst, inv.payload.bytes(), issue);
      if (!blocks) return true;
      inst.waiting_send = true;
      inst.waiting_message = id;
      Instance::WaitWhat w;
      w.kind = WaitKind::kSend;
      w.count = dst;
      w.peer = peer;
      Wait(inst, 0, std::move(w), issue, true);
      return false;
    }
    if (peer.pe() >= index().num_pes() ||
        index().PeOf(peer.pe()).cube_id() == index().PeOf(inst.pe).cube_id()) {
      Fail(inst, absl::StrCat("NOC send to pe ", peer.pe(), ": not a PE of another CUBE"));
    }
    auto send = std::allocate_shared<pb::NocSend>(internal::PoolAllocator<pb::NocSend>());
    send->set_message_id(id);
    send->set_src_pe(inst.pe);
    send->set_dst_pe(peer.pe());
    send->set_bytes(inv.payload.bytes());
    send->set_request_id(inst.request_id);
    *send->mutable_payload() = inv.payload.ref();
    engine.Send(cpu.unit, issue - now, index().NocRouterUnit(index().PeOf(inst.pe).cube_id()).value(),
                std::shared_ptr<const pb::NocSend>(send));
    RecordSend(inst, "send_noc", id, peer.pe(), inv.payload.bytes(), issue);
    return true;
  }

  // kRecv
  AHBM_CHECK(inv.kind == Invocation::Kind::kRecv) << "unknown invocation";
  const uint64_t key = ChannelKey(inst.pe, *inv.peer);
  PostedRecv post;
  post.handle = inv.cmd_id;
  post.inst = &inst;
  post.posted = issue;
  post.dst = inv.result;
  cpu.channels[key].recvs.push_back(post);
  if (HandleState* slot = cpu.Slot(inv.cmd_id)) slot->receive = true;
  AddOutstanding(cpu, inst, inv.cmd_id);
  if (inv.written_end > inv.written_begin) {
    SetWrite(cpu.writes, inv.cmd_id, inv.written_begin, inv.written_end);
  }
  PumpChannel(inst.pe, key);
  if (!inv.blocking || cpu.IsDone(inv.cmd_id)) return true;
  Instance::WaitWhat w;
  w.kind = WaitKind::kRecv;
  w.id = inv.cmd_id;
  w.peer = *inv.peer;
  Wait(inst, inv.cmd_id, std::move(w), issue, true);
  return false;
}

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
  auto pop = std::allocate_shared<pb::IpcqPop>(internal::PoolAllocator<pb::IpcqPop>());
  pop->set_message_id(msg.message_id);
  sim_->context().engine->Send(cpu.unit, at - now, msg.queue,
                               std::shared_ptr<const pb::IpcqPop>(pop));
  ipcq_unpopped_[msg.queue] -= static_cast<int64_t>(msg.arrived_bytes - msg.popped_bytes);
  if (msg.popped_bytes == 0) msg.first_pop = at;
  msg.popped_bytes = msg.arrived_bytes;
  msg.last_pop = at;
  ch.last_pop = at;
}

uint64_t KernelRuntime::Deliver(uint32_t pe, const IncomingMessage& msg, const PostedRecv& recv,
                                SimTime end, bool staged) {
  Cpu& cpu = CpuOf(pe);
  if (store_ != nullptr) {
    auto it = payloads_.find(msg.message_id);
    AHBM_CHECK(it != payloads_.end()) << "no payload for message " << msg.message_id;
    std::vector<float> values(it->second.size() / sizeof(float));
    std::memcpy(values.data(), it->second.data(), it->second.size());
    if (values.size() != recv.dst.elements()) {
      Instance& inst = *recv.inst;
      if (inst.error.empty()) {
        inst.error = absl::StrCat(PeName(pe), ": recv ", recv.handle, " of ",
                                  recv.dst.elements(), " elements got a message of ",
                                  values.size(), " from pe ", msg.src_pe);
      }
    } else if (absl::Status s = store_->Write(recv.dst.ref(), values); !s.ok()) {
      recv.inst->error = std::string(s.message());
    }
    payloads_.erase(it);
  }
  if (observe::OpLog* log = sim_->context().op_log) {
    pb::OpRecord rec;
    rec.set_unit(cpu.unit);
    rec.set_unit_name(sim_->context().Name(cpu.unit));
    rec.set_op(msg.queue != 0 ? "recv_ipcq" : "recv_noc");
    rec.set_cmd_id(recv.handle);
    rec.set_issue_ps(recv.posted.value());
    rec.set_start_ps(std::min(recv.posted, end).value());
    rec.set_end_ps(end.value());
    rec.set_bytes_read(recv.dst.bytes());
    rec.set_request_id(recv.inst->request_id);
    rec.set_label(absl::StrCat("from pe ", msg.src_pe, " msg ", msg.message_id,
                               staged ? " (staged)" : ""));
    log->AddOp(std::move(rec));
  }
  return recv.handle;
}

void KernelRuntime::PumpChannel(uint32_t pe, uint64_t key) {
  Cpu& cpu = CpuOf(pe);
  Channel& ch = cpu.channels[key];
  const bool ipcq = (key & kIpcqChannel) != 0;
  // One step per pass; Complete() may resume kernels that post here again, so nothing is held
  // across it.
  while (true) {
    // A receive (in post order) takes its request's oldest available message: staged (IPCQ)
    // or delivered (NOC).
    std::deque<IncomingMessage>& pool = ipcq ? ch.staged : ch.messages;
    auto r = ch.recvs.begin();
    auto m = pool.end();
    for (; r != ch.recvs.end(); ++r) {
      m = std::find_if(pool.begin(), pool.end(), [&](const IncomingMessage& x) {
        return x.request_id == r->inst->request_id;
      });
      if (m != pool.end()) break;
    }
    if (r != ch.recvs.end()) {
      // Staged (popped already) or delivered (NOC): no pop, no credit change.
      const SimTime end = std::max({r->posted, m->last_arrival, m->last_pop});
      const uint64_t handle = Deliver(pe, *m, *r, end, ipcq);
      if (ipcq) cpu.staged_bytes -= m->bytes;
      pool.erase(m);
      ch.recvs.erase(r);
      Complete(pe, handle, end);
      continue;
    }
    if (!ipcq || ch.messages.empty()) return;
    // IPCQ: the queue's head message.
    IncomingMessage& head = ch.messages.front();
    auto own = std::find_if(ch.recvs.begin(), ch.recvs.end(), [&](const PostedRecv& r) {
      return r.inst->request_id == head.request_id;
    });
    if (own != ch.recvs.end()) {
      // Pop what has arrived (at the post if it lies ahead); later chunks pop on arrival.
      PopArrived(cpu, ch, head, own->posted);
      if (!head.complete) return;
      const SimTime end = std::max({own->posted, head.last_arrival, head.last_pop});
      const uint64_t handle = Deliver(pe, head, *own, end, false);
      if (head.staging) cpu.staged_bytes -= head.bytes;
      ch.messages.pop_front();
      ch.recvs.erase(own);
      Complete(pe, handle, end);
      continue;
    }
    if (!head.staging) {
      // Stage only for a waiting receive (of another request) and only what fits.
      if (ch.recvs.empty() || cpu.staged_bytes + head.bytes > kDemuxStagingBytes) return;
      head.staging = true;
      head.stage_from = ch.recvs.front().posted;
      head.stage_for = ch.recvs.front().inst->request_id;
      cpu.staged_bytes += head.bytes;
    }
    PopArrived(cpu, ch, head, head.stage_from);
    if (!head.complete) return;
    if (observe::OpLog* log = sim_->context().op_log) {
      pb::OpRecord rec;
      rec.set_unit(cpu.unit);
      rec.set_unit_name(sim_->context().Name(cpu.unit));
      rec.set_op("stage_ipcq");
      rec.set_issue_ps(head.first_pop.value());
      rec.set_start_ps(head.first_pop.value());
      rec.set_end_ps(head.last_pop.value());
      rec.set_bytes_written(head.bytes);
      rec.set_request_id(head.request_id);
      rec.set_label(absl::StrCat("from pe ", head.src_pe, " msg ", head.message_id,
                                 " (request ", head.stage_for, " waits)"));
      log->AddOp(std::move(rec));
    }
    ch.staged.push_back(std::move(head));
    ch.messages.pop_front();
  }
}

std::string KernelRuntime::HeadOfLine(const Instance& inst) const {
  if (inst.waiting_on == 0) return "";
  const Cpu& cpu = CpuOf(inst.pe);
  for (const auto& [key, ch] : cpu.channels) {
    if (ch.messages.empty() || ch.messages.front().request_id == inst.request_id) continue;
    for (const PostedRecv& r : ch.recvs) {
      if (r.inst != &inst || r.handle != inst.waiting_on) continue;
      const IncomingMessage& head = ch.messages.front();
      return absl::StrCat(" behind request ", head.request_id, "'s message ", head.message_id,
                          " (", head.bytes, " bytes) at the queue head; staging buffer ",
                          cpu.staged_bytes, " of ", kDemuxStagingBytes, " bytes in use");
    }
  }
  return "";
}

void KernelRuntime::AddOutstanding(Cpu& cpu, Instance& inst, uint64_t handle) {
  HandleState* slot = cpu.Slot(handle);
  AHBM_CHECK(slot != nullptr) << "handle " << handle << " was not issued on pe " << cpu.pe;
  if (slot->owner == &inst) return;
  slot->owner = &inst;
  ++inst.outstanding;
}

void KernelRuntime::Complete(uint32_t pe, uint64_t handle, SimTime end) {
  Cpu& cpu = CpuOf(pe);
  if (HandleState* slot = cpu.Slot(handle)) {
    slot->done = true;
    slot->end = end;
    if (slot->owner != nullptr) {
      --slot->owner->outstanding;
      slot->owner = nullptr;
    }
  } else {
    cpu.done_other[handle] = end;
  }
  EraseWrite(cpu.writes, handle);
  if (cpu.IsReceive(handle) && !cpu.held.empty()) {
    for (HeldCommand& x : cpu.held) {
      if (x.receives.erase(handle) > 0) x.hand = std::max(x.hand, end);
    }
    ReleaseHeld(cpu);
  }
  for (Instance* inst : cpu.instances) {
    if (inst->state != Instance::State::kWaiting) continue;
    if (inst->waiting_on == handle && handle != 0) {
      Wake(*inst, end);
    } else if (inst->waiting_all && inst->outstanding == 0) {
      Wake(*inst, end);
    }
  }
  RunCpu(pe);
}

void KernelRuntime::ReleaseHeld(Cpu& cpu) {
  sim::Engine& engine = *sim_->context().engine;
  const SimTime now = Now();
  // Issue order: a command's held predecessors come before it, so one pass releases chains
  // (each sent after its predecessors, at the same time or later).
  for (auto it = cpu.held.begin(); it != cpu.held.end();) {
    if (!it->receives.empty() || !it->commands.empty()) {
      ++it;
      continue;
    }
    const SimTime at = std::max(it->hand, now);
    std::visit([&](const auto& c) { engine.Send(cpu.unit, at - now, cpu.scheduler, c); },
               it->command);
    for (HeldCommand& x : cpu.held) {
      if (x.commands.erase(it->cmd_id) > 0) x.hand = std::max(x.hand, at);
    }
    it = cpu.held.erase(it);
  }
}

void KernelRuntime::Wake(Instance& inst, SimTime end) {
  const bool real = end > inst.wait_from;
  if (real) {
    if (observe::OpLog* log = sim_->context().op_log) {
      pb::StallRecord rec;
      rec.set_pe(inst.pe);
      rec.set_request_id(inst.request_id);
      rec.set_waits_on(WaitText(inst));
      rec.set_cmd_id(inst.waiting_on);
      rec.set_from_ps(inst.wait_from.value());
      rec.set_to_ps(end.value());
      log->AddStall(std::move(rec));
    }
  }
  inst.state = Instance::State::kReady;
  inst.waiting_on = 0;
  inst.waiting_all = false;
  inst.waiting_send = false;
  inst.real_wait_cost = real && inst.real_wait_cost;
  inst.wait_from = std::max(end, inst.wait_from);  // resume no earlier than this
}

void KernelRuntime::RunCpu(uint32_t pe) {
  Cpu& cpu = CpuOf(pe);
  if (cpu.running) return;
  cpu.running = true;
  while (true) {
    Instance* next = nullptr;
    if (cpu.holder != nullptr) {
      if (cpu.holder->state == Instance::State::kReady) {
        next = cpu.holder;
      } else if (Now() < cpu.hold_until) {
        break;
      }
      cpu.holder = nullptr;
    }
    if (next == nullptr) {
      for (Instance* inst : cpu.instances) {
        if (inst->state != Instance::State::kReady && inst->state != Instance::State::kNew) continue;
        if (next == nullptr || inst->request_id < next->request_id) next = inst;
      }
    }
    if (next == nullptr) break;
    Resume(*next);
  }
  cpu.running = false;
}

void KernelRuntime::Resume(Instance& inst) {
  Cpu& cpu = CpuOf(inst.pe);
  const bool first = inst.state == Instance::State::kNew;
  if (!first) {
    cpu.cpu = std::max(cpu.cpu, inst.wait_from);
    if (inst.real_wait_cost) {
      cpu.cpu = Edge(std::max(cpu.cpu, Now())) + CyclesTime(profile_.resume_after_wait_cycles());
    }
  }
  inst.real_wait_cost = true;
  inst.state = Instance::State::kReady;
  inst.waiting_what.clear();
  try {
    if (inst.pending && !TryIssue(inst)) return;  // waits again
  } catch (const KernelError& e) {
    inst.error = e.what();
    inst.pending.reset();
  }
  std::coroutine_handle<> h = first ? std::coroutine_handle<>(inst.task->handle()) : inst.resume;
  h.resume();
  if (inst.task->done()) {
    Finish(inst);
    return;
  }
  AHBM_CHECK(inst.state == Instance::State::kWaiting)
      << PeName(inst.pe) << ": kernel suspended outside a tl call";
}

void KernelRuntime::Finish(Instance& inst) {
  inst.state = Instance::State::kDone;
  inst.waiting_what.clear();
  std::string message;
  if (std::exception_ptr e = inst.task->error()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      message = ex.what();
    }
  } else if (!inst.error.empty()) {
    message = inst.error;
  }
  if (!message.empty()) sim_->context().errors.push_back(message);
}

// ---- handlers ----

void KernelRuntime::OnStart(uint32_t pe) { RunCpu(pe); }

void KernelRuntime::OnCheck(uint32_t pe) {
  Cpu& cpu = CpuOf(pe);
  if (Now() >= cpu.hold_until) cpu.holder = nullptr;
  RunCpu(pe);
}

void KernelRuntime::OnCompletion(uint32_t pe, const pb::Completion& done) {
  Complete(pe, done.cmd_id(), SimTime(done.end_ps()));
}

void KernelRuntime::OnCommandError(uint32_t pe, const pb::CommandError& error) {
  Cpu& cpu = CpuOf(pe);
  HandleState* slot = cpu.Slot(error.cmd_id());
  for (Instance* inst : cpu.instances) {
    if (slot == nullptr || slot->owner != inst) continue;
    slot->owner = nullptr;
    --inst->outstanding;
    if (inst->state == Instance::State::kDone) continue;
    inst->state = Instance::State::kDone;  // stopped: its coroutine is not resumed again
    inst->waiting_what.clear();
    sim_->context().errors.push_back(error.message());
  }
}

void KernelRuntime::OnAccepted(uint32_t pe, const pb::IpcqAccepted& accepted) {
  Cpu& cpu = CpuOf(pe);
  for (Instance* inst : cpu.instances) {
    if (inst->state == Instance::State::kWaiting && inst->waiting_send &&
        inst->waiting_message == accepted.message_id()) {
      Wake(*inst, SimTime(accepted.accepted_ps()));
    }
  }
  RunCpu(pe);
}

void KernelRuntime::OnArrival(uint32_t pe, const pb::IpcqArrival& arrival) {
  Cpu& cpu = CpuOf(pe);
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
    msg->bytes = arrival.message_bytes();
    msg->chunks = arrival.chunk_count();
    msg->queue = arrival.queue_unit();
  }
  ++msg->arrived;
  msg->arrived_bytes += arrival.bytes();
  msg->last_arrival = Now();
  msg->complete = msg->arrived == msg->chunks;
  // A receive already posted for this (head) message, or staging, pops the new chunk at once.
  PumpChannel(pe, key);
}

void KernelRuntime::OnNocDelivered(uint32_t pe, const pb::NocDelivered& delivered) {
  Cpu& cpu = CpuOf(pe);
  const uint64_t key = delivered.src_pe();
  IncomingMessage& msg = cpu.channels[key].messages.emplace_back();
  msg.message_id = delivered.message_id();
  msg.src_pe = delivered.src_pe();
  msg.request_id = delivered.request_id();
  msg.bytes = delivered.bytes();
  msg.chunks = 1;
  msg.arrived = 1;
  msg.complete = true;
  msg.last_arrival = Now();
  PumpChannel(pe, key);
}

}  // namespace ahbm::kernels
