// AHBM_CHECK: invariant checks for our own bugs (STYLE 7). User errors return absl::Status.
//
// Contract: AHBM_CHECK(cond) << "context"; evaluates `cond` exactly once; when it is false it
// prints file:line, the condition text and the streamed context to stderr, then that this is
// the simulator's bug and not the user's input, with the command line and build a program set
// (SetBugReportContext), asks for a bug report, and exits with kExitInternalBug (70,
// EX_SOFTWARE) at once (std::_Exit: no destructors run on a broken state). It is never compiled
// out (AHBM_DCHECK is, under NDEBUG).
#ifndef AHBMSIM_BASE_CHECK_H_
#define AHBMSIM_BASE_CHECK_H_

#include <sstream>
#include <string>

namespace ahbm {

// The exit code of a failed AHBM_CHECK: an internal error (sysexits' EX_SOFTWARE).
inline constexpr int kExitInternalBug = 70;

// What a failed AHBM_CHECK prints for a bug report: the program's command line and its build
// (version and commit). Set once by a program's main; empty fields are left out.
void SetBugReportContext(std::string command_line, std::string build);

// Fuzz harnesses only (tests/fuzz): a failed AHBM_CHECK then ends in abort() after its message,
// so that the fuzzer sees a crash and keeps the input (it cannot tell an exit code 70 apart).
void SetCheckFailureAborts(bool aborts);

}  // namespace ahbm

namespace ahbm::check_internal {

// Collects the streamed context; its destructor reports and aborts.
class Failure {
 public:
  Failure(const char* file, int line, const char* condition);
  Failure(const Failure&) = delete;
  Failure& operator=(const Failure&) = delete;
  [[noreturn]] ~Failure();

  std::ostream& stream() { return message_; }

 private:
  std::ostringstream message_;
};

}  // namespace ahbm::check_internal

// `for` instead of `if` so that a trailing `else` in the caller cannot bind to the macro.
#define AHBM_CHECK(cond)            \
  for (; !static_cast<bool>(cond);) \
  ::ahbm::check_internal::Failure(__FILE__, __LINE__, #cond).stream()

#ifdef NDEBUG
#define AHBM_DCHECK(cond)                    \
  for (; false && !static_cast<bool>(cond);) \
  ::ahbm::check_internal::Failure(__FILE__, __LINE__, #cond).stream()
#else
#define AHBM_DCHECK(cond) AHBM_CHECK(cond)
#endif

#endif  // AHBMSIM_BASE_CHECK_H_
