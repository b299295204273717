// Files for the milestone's tests: a fresh folder under the test's temporary directory, and a
// file's bytes.
#ifndef AHBMSIM_MILESTONE_TEST_FILES_H_
#define AHBMSIM_MILESTONE_TEST_FILES_H_

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace ahbm::milestone {

// $TEST_TMPDIR/<name> (/tmp outside Bazel), emptied and created.
inline std::string TestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::filesystem::path dir = std::filesystem::path(tmp != nullptr ? tmp : "/tmp") / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// The file's bytes ("" when it cannot be read).
inline std::string Read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace ahbm::milestone

#endif  // AHBMSIM_MILESTONE_TEST_FILES_H_
