// What kind of failure a status is, and the exit code `ahbm` gives it (DESIGN §6).
//
//   kind         made by                     code                 exit  whose fault
//   input        absl::InvalidArgumentError, InvalidArgument,     2     the user's input: a
//                NotFoundError, DataLossError NotFound, DataLoss        field, a file
//   deadlock     DeadlockError               FailedPrecondition   3     the kernels' schedule:
//                                                                       no event left, a CPU
//                                                                       still waits
//   kernel fault KernelFaultError            FailedPrecondition   4     a kernel broke a rule
//                                                                       at run time (a command
//                                                                       the PE refuses, an arena
//                                                                       overflow): the kernel's
//                                                                       bug, or its capacity
//                                                                       check's
//   invariant    InvariantError              Internal             70    the simulator's own bug
//                                                                       (as a failed AHBM_CHECK)
//   other        any other status            its own              1     the environment (a file
//                                                                       not writable, a worker
//                                                                       lost, ...)
//
// Contract: the kind rides on the status as a payload (kKindPayload), so it survives copies,
// RETURN_IF_ERROR, WithMessage and Annotate; KindOf reads the payload first and falls back to
// the code (input for InvalidArgument / NotFound / DataLoss, else other). A status rebuilt from
// its code and message alone loses the kind: use WithMessage or Annotate to add context, and
// KindName / KindFromName to carry it through a serialized result (sweep's JobResult).
#ifndef AHBMSIM_BASE_ERRORS_H_
#define AHBMSIM_BASE_ERRORS_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace ahbm {

enum class ErrorKind { kInput, kDeadlock, kKernelFault, kInvariant, kOther };

inline constexpr int kExitOk = 0;
inline constexpr int kExitOther = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitDeadlock = 3;
inline constexpr int kExitKernelFault = 4;
// = kExitInternalBug (base/check.h), the exit of a failed AHBM_CHECK.
inline constexpr int kExitInvariant = 70;

// The payload's type URL; its value is KindName(kind).
inline constexpr std::string_view kKindPayload = "ahbmsim/error_kind";
// WithExitCode's payload: the decimal exit code.
inline constexpr std::string_view kExitCodePayload = "ahbmsim/exit_code";

absl::Status DeadlockError(std::string_view message);
absl::Status KernelFaultError(std::string_view message);
absl::Status InvariantError(std::string_view message);
// `status` with `kind` attached (OK stays OK). For a failure first seen as another kind: a
// command refusal is the input's fault in a command stream and the kernel's under kernels.
absl::Status WithKind(absl::Status status, ErrorKind kind);

ErrorKind KindOf(const absl::Status& status);
// 0 for OK; else the code WithExitCode set, or the table's exit code of KindOf(status).
int ExitCodeOf(const absl::Status& status);
// A failure passed on from another program, which ends `ahbm` with that program's exit code
// (1..255; `ahbm slurm --wait`: the highest failed array task's). OK stays OK.
absl::Status WithExitCode(absl::Status status, int code);

// "input", "deadlock", "kernel fault", "invariant", "other".
std::string_view KindName(ErrorKind kind);
std::optional<ErrorKind> KindFromName(std::string_view name);

// `status` with another message (context added), the code and every payload (the kind) kept.
absl::Status WithMessage(const absl::Status& status, std::string_view message);
// WithMessage(status, prefix + its message).
absl::Status Annotate(const absl::Status& status, std::string_view prefix);

}  // namespace ahbm

#endif  // AHBMSIM_BASE_ERRORS_H_
