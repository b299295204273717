#include "tests/fuzz/fuzz_support.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "google/protobuf/stubs/logging.h"
#include "topology/loader.h"

namespace ahbm::fuzz {

void InitHarness() {
  SetCheckFailureAborts(true);
  google::protobuf::SetLogHandler(nullptr);
}

const std::string& WriteScratchFile(const uint8_t* data, size_t size) {
  // In memory (/dev/shm) when there is one: a file per input on disk made the bounded tests ten
  // times slower. Removed at exit.
  static const std::string* path = [] {
    const char* tmp = std::getenv("TEST_TMPDIR");
    const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (tmp ? tmp : "/tmp");
    auto* p = new std::string(absl::StrCat(dir, "/ahbm_fuzz_", getpid(), ".bin"));
    std::atexit([] { std::remove(path->c_str()); });
    return p;
  }();
  std::ofstream out(*path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) Broken(absl::StrCat("cannot write the scratch file ", *path));
  return *path;
}

const pb::Chip& Topology(std::string_view name) {
  static auto* chips = new std::map<std::string, pb::Chip, std::less<>>;
  auto it = chips->find(name);
  if (it == chips->end()) {
    const std::string path = "topology/" + std::string(name) + ".textproto";
    absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(path);
    if (!chip.ok()) {
      Broken(absl::StrCat(chip.status().message(),
                          " (run the harness from its runfiles root: tests/fuzz/README.md)"));
    }
    it = chips->emplace(std::string(name), *std::move(chip)).first;
  }
  return it->second;
}

void CheckRefusal(const absl::Status& status) {
  if (status.message().empty()) Broken("a refusal without a message");
  if (status.message().find('\n') != absl::string_view::npos) {
    Broken(absl::StrCat("a refusal of more than one line: ", status.message()));
  }
}

void Broken(std::string_view what) {
  std::fprintf(stderr, "fuzz harness: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

}  // namespace ahbm::fuzz
