// AHBM_CHECK: aborts with a message when one of our own invariants is broken (a bug, never
// bad user input — that is an absl::Status; STYLE 7). Abseil 20220623 has no absl/log.
//   AHBM_CHECK(x < n) << "x=" << x;
#ifndef AHBM_TOPOLOGY_CHECK_H_
#define AHBM_TOPOLOGY_CHECK_H_

#include <sstream>

namespace ahbm::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  template <typename T>
  CheckFailure& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

}  // namespace ahbm::internal

#define AHBM_CHECK(condition) \
  if (condition) {            \
  } else                      \
    ::ahbm::internal::CheckFailure(__FILE__, __LINE__, #condition)

#endif  // AHBM_TOPOLOGY_CHECK_H_
