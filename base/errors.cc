#include "base/errors.h"

#include <array>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/check.h"

namespace ahbm {
namespace {

static_assert(kExitInvariant == kExitInternalBug);

constexpr std::array<std::pair<ErrorKind, std::string_view>, 5> kNames = {{
    {ErrorKind::kInput, "input"},
    {ErrorKind::kDeadlock, "deadlock"},
    {ErrorKind::kKernelFault, "kernel fault"},
    {ErrorKind::kInvariant, "invariant"},
    {ErrorKind::kOther, "other"},
}};

absl::Status Make(absl::StatusCode code, std::string_view message, ErrorKind kind) {
  return WithKind(absl::Status(code, std::string(message)), kind);
}

}  // namespace

absl::Status DeadlockError(std::string_view message) {
  return Make(absl::StatusCode::kFailedPrecondition, message, ErrorKind::kDeadlock);
}

absl::Status KernelFaultError(std::string_view message) {
  return Make(absl::StatusCode::kFailedPrecondition, message, ErrorKind::kKernelFault);
}

absl::Status InvariantError(std::string_view message) {
  return Make(absl::StatusCode::kInternal, message, ErrorKind::kInvariant);
}

absl::Status WithKind(absl::Status status, ErrorKind kind) {
  if (!status.ok()) {
    status.SetPayload(std::string(kKindPayload), absl::Cord(std::string(KindName(kind))));
  }
  return status;
}

ErrorKind KindOf(const absl::Status& status) {
  if (auto payload = status.GetPayload(std::string(kKindPayload))) {
    if (std::optional<ErrorKind> kind = KindFromName(std::string(*payload))) return *kind;
  }
  if (absl::IsInvalidArgument(status) || absl::IsNotFound(status) || absl::IsDataLoss(status)) {
    return ErrorKind::kInput;
  }
  return ErrorKind::kOther;
}

absl::Status WithExitCode(absl::Status status, int code) {
  if (!status.ok() && code >= 1 && code <= 255) {
    status.SetPayload(std::string(kExitCodePayload), absl::Cord(std::to_string(code)));
  }
  return status;
}

int ExitCodeOf(const absl::Status& status) {
  if (status.ok()) return kExitOk;
  if (const auto code = status.GetPayload(std::string(kExitCodePayload))) {
    int value = 0;
    if (absl::SimpleAtoi(std::string(*code), &value) && value >= 1 && value <= 255) return value;
  }
  switch (KindOf(status)) {
    case ErrorKind::kInput: return kExitBadInput;
    case ErrorKind::kDeadlock: return kExitDeadlock;
    case ErrorKind::kKernelFault: return kExitKernelFault;
    case ErrorKind::kInvariant: return kExitInvariant;
    case ErrorKind::kOther: return kExitOther;
  }
  return kExitOther;
}

std::string_view KindName(ErrorKind kind) {
  for (const auto& [k, name] : kNames) {
    if (k == kind) return name;
  }
  return "other";
}

std::optional<ErrorKind> KindFromName(std::string_view name) {
  for (const auto& [k, n] : kNames) {
    if (n == name) return k;
  }
  return std::nullopt;
}

absl::Status Annotate(const absl::Status& status, std::string_view prefix) {
  if (status.ok()) return status;
  return WithMessage(status, absl::StrCat(std::string(prefix), status.message()));
}

absl::Status WithMessage(const absl::Status& status, std::string_view message) {
  if (status.ok()) return status;
  absl::Status out(status.code(), std::string(message));
  status.ForEachPayload([&out](auto url, const absl::Cord& value) {
    out.SetPayload(std::string(url), value);
  });
  return out;
}

}  // namespace ahbm
