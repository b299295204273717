#include "base/check.h"

#include <cstdlib>
#include <iostream>
#include <string>
#include <utility>

namespace ahbm {
namespace {

struct BugReportContext {
  std::string command_line;
  std::string build;
  bool aborts = false;
};

BugReportContext& Context() {
  static BugReportContext* context = new BugReportContext;  // never destroyed: used at exit
  return *context;
}

}  // namespace

void SetBugReportContext(std::string command_line, std::string build) {
  Context().command_line = std::move(command_line);
  Context().build = std::move(build);
}

void SetCheckFailureAborts(bool aborts) { Context().aborts = aborts; }

namespace check_internal {

Failure::Failure(const char* file, int line, const char* condition) {
  message_ << file << ":" << line << ": CHECK failed: " << condition << " ";
}

Failure::~Failure() {
  const BugReportContext& context = Context();
  std::cerr << message_.str() << "\n"
            << "This is an internal error of the simulator (a bug in ahbmsim, not in your "
               "input). Please report it with this message";
  if (!context.command_line.empty()) std::cerr << ",\n  the command: " << context.command_line;
  if (!context.build.empty()) std::cerr << ",\n  the build:   " << context.build;
  std::cerr << std::endl;
  if (context.aborts) std::abort();
  std::_Exit(kExitInternalBug);
}

}  // namespace check_internal
}  // namespace ahbm
