// Returning a failed status from the enclosing function, the one way (XLA / Abseil style):
//
//   RETURN_IF_ERROR(Validate(chip));                 // an absl::Status expression
//   RETURN_IF_ERROR(loaded.status());                // a StatusOr kept for later use
//   ASSIGN_OR_RETURN(const pb::Chip chip, Load(f));  // declares `chip` from a StatusOr's value
//
// The enclosing function returns absl::Status or any absl::StatusOr<T>. The expression is
// evaluated once. ASSIGN_OR_RETURN declares its left side in the enclosing scope (so it cannot
// be the sole statement of an unbraced if).
#ifndef AHBMSIM_BASE_STATUS_MACROS_H_
#define AHBMSIM_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define RETURN_IF_ERROR(...)                                              \
  do {                                                                    \
    if (::absl::Status ahbm_status_ = (__VA_ARGS__); !ahbm_status_.ok()) { \
      return ahbm_status_;                                                \
    }                                                                     \
  } while (false)

#define AHBM_STATUS_CONCAT_INNER_(a, b) a##b
#define AHBM_STATUS_CONCAT_(a, b) AHBM_STATUS_CONCAT_INNER_(a, b)

#define ASSIGN_OR_RETURN(lhs, ...) \
  AHBM_ASSIGN_OR_RETURN_IMPL_(AHBM_STATUS_CONCAT_(ahbm_statusor_, __LINE__), lhs, __VA_ARGS__)

#define AHBM_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, ...) \
  auto statusor = (__VA_ARGS__);                        \
  if (!statusor.ok()) return statusor.status();         \
  lhs = *std::move(statusor)

#endif  // AHBMSIM_BASE_STATUS_MACROS_H_
