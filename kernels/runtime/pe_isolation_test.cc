// Each PE's runtime reaches another PE only by message or through IpcqCredit (pe_runtime.h):
// the code of PeRuntime and of what the run shares (run_context.h) names neither the harness
// (KernelRuntime, which holds every PE's runtime) nor another PeRuntime. Read from the sources,
// comments aside, so a back door added later fails here.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ahbm::kernels {
namespace {

// `path` with its // comments removed.
std::string CodeOf(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream out;
  std::string line;
  while (std::getline(in, line)) {
    const size_t comment = line.find("//");
    out << line.substr(0, comment) << "\n";
  }
  return out.str();
}

const std::vector<std::string> kPeFiles = {
    "kernels/runtime/pe_runtime.h", "kernels/runtime/pe_runtime.cc",
    "kernels/runtime/messaging.cc", "kernels/runtime/run_context.h",
    "kernels/runtime/run_context.cc"};

TEST(PeIsolationTest, NoPeRuntimeCodeNamesTheHarness) {
  for (const std::string& path : kPeFiles) {
    const std::string code = CodeOf(path);
    EXPECT_EQ(code.find("KernelRuntime"), std::string::npos) << path;
    EXPECT_EQ(code.find("kernels/runtime/runtime.h"), std::string::npos) << path;
  }
}

TEST(PeIsolationTest, NoPeRuntimeHoldsOrReachesAnother) {
  for (const std::string& path : kPeFiles) {
    const std::string code = CodeOf(path);
    EXPECT_EQ(code.find("PeRuntime*"), std::string::npos) << path;
    EXPECT_EQ(code.find("PeRuntime&"), std::string::npos) << path;
    EXPECT_EQ(code.find("PeRuntime>"), std::string::npos) << path;  // containers of them
  }
  // What the run shares knows no PE's runtime nor its instances.
  for (const std::string& path : {"kernels/runtime/run_context.h",
                                  "kernels/runtime/run_context.cc"}) {
    const std::string code = CodeOf(path);
    EXPECT_EQ(code.find("PeRuntime"), std::string::npos) << path;
    EXPECT_EQ(code.find("Instance"), std::string::npos) << path;
  }
}

}  // namespace
}  // namespace ahbm::kernels
