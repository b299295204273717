// The `tl` kernel API (DESIGN §4; ADR-0060 rev2 §1, §3-§5): what a kernel coroutine calls on
// its PE. One `Tl` per kernel instance (one per participating PE and request). Every call that
// reaches the hardware is `co_await`ed; names follow the ADR.
//
// Timing semantics (exactly DESIGN §4; the runtime in runtime.h implements them):
// - Each call costs the CPU its issue cost (ADR-0064 profile) before the command leaves.
// - Non-blocking, returning a pending handle at once: Load (lazy), Composite, ExComposite,
//   RecvAsync, Send (blocks only while the destination IPCQ queue has no credit, or, over the
//   NOC, while the destination endpoint has no room: no receive posted for the message and
//   the endpoint queue short of credit for all of it).
// - Blocking (the CPU waits for completion): MATH ops, Dot, Store, Recv, Wait, WaitAll.
// - Auto-wait: a MATH op, Dot, Store or Send whose input is still pending first waits for it.
//   Composite, ExComposite and LseMerge never wait: pending inputs become scheduler
//   dependencies; an input still in a posted receive (RecvAsync) holds the issued command in
//   the runtime until the receive completes (runtime.h), so the issue cost overlaps the message.
// - Results of MATH ops, Dot, Recv and Load go to the current arena (scratch unless an `out`
//   or Arena::kPersistent is given); ScratchScope recycles the scratch arena (ADR-0063).
// Errors in a kernel (overflow, shape mismatch, leaving a scope with a pending write) throw
// KernelError out of the call; the runtime stops the kernel and reports the message.
#ifndef AHBMSIM_KERNELS_RUNTIME_TL_H_
#define AHBMSIM_KERNELS_RUNTIME_TL_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/runtime/call.h"
#include "kernels/runtime/peer.h"
#include "kernels/runtime/scratch_scope.h"
#include "kernels/runtime/tensor.h"
#include "absl/types/span.h"
#include "proto/commands.pb.h"
#include "proto/trace.pb.h"

namespace ahbm::kernels {

class PeRuntime;
class Instance;

// A composite epilogue stage (DESIGN §4b: `scale` is one).
struct Epilogue {
  pb::MathOp op = pb::SCALE;
  float scalar = 0;
  std::optional<Tensor> operand;
  static Epilogue Scale(float s) { return Epilogue{pb::SCALE, s, std::nullopt}; }
  static Epilogue With(pb::MathOp op, Tensor operand) { return Epilogue{op, 0, std::move(operand)}; }
};

class Tl {
 public:
  Tl(PeRuntime* runtime, Instance* instance, uint32_t pe)
      : rt_(runtime), inst_(instance), pe_(pe) {}

  // SPMD ids: axis 0 = PE in CUBE, 1 = CUBE in SIP, 2 = SIP.
  uint32_t program_id(int axis) const;
  uint32_t pe() const { return pe_; }  // global PE index
  uint32_t request_id() const;

  // Memory without commands.
  Tensor Alloc(ShapeArg shape, pb::DType dtype = pb::FP32, Arena arena = Arena::kScratch);
  // An HBM operand of PE `owner` (default: this PE) at local address `addr` (ADR `tl.ref`).
  Tensor Ref(uint64_t addr, ShapeArg shape, pb::DType dtype = pb::BF16,
             std::optional<uint32_t> owner = std::nullopt) const;
  ScratchScope Scope() { return ScratchScope(this); }

  // HBM -> TCM, lazy (non-blocking; auto-waited by the first primitive that reads it).
  Call Load(const Tensor& hbm, Arena arena = Arena::kScratch);
  // The same into a TCM tensor the kernel owns (same shape and dtype): a reused buffer.
  Call LoadInto(const Tensor& hbm, const Tensor& dst);
  // TCM -> HBM, blocking.
  Call Store(const Tensor& hbm_dst, const Tensor& src);
  // out = a · b, then the epilogue; non-blocking. `out` default: a new fp32 tensor.
  Call Composite(const Tensor& a, const Tensor& b, std::vector<Epilogue> epilogue = {},
                 std::optional<Tensor> out = std::nullopt);
  // ex_composite("softmax_pv", s, v, acc, scale): non-blocking; returns acc.o (pending).
  Call ExComposite(const Tensor& s, const Tensor& v, const Accumulator& acc, float scale);
  // The decode reduce's log-sum-exp merge (ADR rev2 §4) of `in` into `acc`, written to `out`
  // (may be `acc`), as ONE MATH-engine command (pb::LseMergeCmd): non-blocking like
  // ExComposite (pending inputs become scheduler dependencies; a pending RecvAsync input holds
  // it until the message has landed); ex_composite issue cost; returns out.o (pending).
  Call LseMerge(const Accumulator& acc, const Accumulator& in, const Accumulator& out);
  // a · b on the GEMM engine, blocking; fp32 result.
  Call Dot(const Tensor& a, const Tensor& b, std::optional<Tensor> out = std::nullopt);

  // MATH primitives (blocking). Binary ops broadcast a [1, C] row or [R, 1] column.
  Call Max(const Tensor& x, int axis = -1, std::optional<Tensor> out = std::nullopt);
  Call Sum(const Tensor& x, int axis = -1, std::optional<Tensor> out = std::nullopt);
  Call Exp(const Tensor& x, std::optional<Tensor> out = std::nullopt);
  Call Scale(const Tensor& x, float s, std::optional<Tensor> out = std::nullopt);
  Call Maximum(const Tensor& a, const Tensor& b, std::optional<Tensor> out = std::nullopt);
  Call Add(const Tensor& a, const Tensor& b, std::optional<Tensor> out = std::nullopt);
  Call Sub(const Tensor& a, const Tensor& b, std::optional<Tensor> out = std::nullopt);
  Call Mul(const Tensor& a, const Tensor& b, std::optional<Tensor> out = std::nullopt);
  Call Div(const Tensor& a, const Tensor& b, std::optional<Tensor> out = std::nullopt);
  Call Copy(const Tensor& x, std::optional<Tensor> out = std::nullopt);
  Call Fill(ShapeArg shape, float value, pb::DType dtype = pb::FP32,
            Arena arena = Arena::kScratch);
  Call FillInto(const Tensor& out, float value);
  Call Transpose(const Tensor& x, std::optional<Tensor> out = std::nullopt);

  // Messages. Send's payload is read when the send issues.
  Call Send(const Peer& to, const Tensor& x);
  Call Recv(const Peer& from, ShapeArg shape, pb::DType dtype = pb::FP32,
            Arena arena = Arena::kScratch);
  Call RecvAsync(const Peer& from, ShapeArg shape, pb::DType dtype = pb::FP32,
                 Arena arena = Arena::kScratch);
  // Receives into a TCM tensor the kernel owns (a reused buffer; the message must match its
  // shape and dtype), blocking or posted.
  Call RecvInto(const Peer& from, const Tensor& dst);
  Call RecvAsyncInto(const Peer& from, const Tensor& dst);
  // Waits for a pending tensor's producer; WaitAll for every command this kernel issued.
  Call Wait(const Tensor& x);
  Call WaitAll();

  // Replay (kernels/replay): issues recorded call `r` of this instance again (COMMAND, SEND,
  // RECV, WAIT, WAIT_ALL): a command gets a new id, its dependencies come from the recorded
  // input groups by the rules above, each producer through `handles` (call index + 1 -> this
  // run's handle; 0 -> none). The result's producer is the call's handle. The command is
  // moved out of `r`.
  Call Replay(pb::CallRecord& r, absl::Span<const uint64_t> handles);

  // Resolves a direction name: "N"/"S"/"E"/"W" (IPCQ), "cube_N"/... (same PE index of the
  // neighbouring CUBE, NOC), "global_E"/"global_W" (same CUBE and PE of the next / previous SIP,
  // UCIe), "ring+"/"ring-" (next / previous CUBE of the launch's ring, same PE index).
  Peer PeerOf(const std::string& direction) const;

  PeRuntime* runtime() const { return rt_; }
  Instance* instance() const { return inst_; }

 private:
  Call Math(pb::MathOp op, std::initializer_list<const Tensor*> inputs, ShapeArg out_shape,
            std::optional<Tensor> out, int axis = -1, float scalar = 0);
  Call Gemm(const Tensor& a, const Tensor& b, std::vector<Epilogue> epilogue,
            std::optional<Tensor> out, bool composite);
  Call Receive(const Peer& from, const Tensor& dst, bool blocking);

  PeRuntime* rt_;
  Instance* inst_;
  uint32_t pe_;
};

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_RUNTIME_TL_H_
