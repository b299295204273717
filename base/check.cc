#include "base/check.h"

#include <cstdlib>
#include <iostream>

namespace ahbm::check_internal {

Failure::Failure(const char* file, int line, const char* condition) {
  message_ << file << ":" << line << ": CHECK failed: " << condition << " ";
}

Failure::~Failure() {
  std::cerr << message_.str() << std::endl;
  std::abort();
}

}  // namespace ahbm::check_internal
