// The bounded stand-in for libFuzzer's main (tests/fuzz/README.md): links with a harness's
// LLVMFuzzerTestOneInput in the normal build, so that every harness runs in `bazel test //...`
// with no clang. Deterministic: the same corpus and flags run the same inputs.
//
//   <harness> [--runs=N] [--seed=S] [--corpus=DIR]... [FILE]...
//
// Runs every FILE, then every file of each corpus directory (in name order), then N inputs
// made from them by a seeded mutator (bit flips, interesting bytes and numbers, inserted,
// erased, repeated and spliced ranges). A harness that crashes (a sanitizer report, an abort, a
// failed AHBM_CHECK: SetCheckFailureAborts) fails the test; the input that did is written to
// $TEST_UNDECLARED_OUTPUTS_DIR (or the working directory) as fuzz-crash.bin first and its
// length printed, so it can be added to the corpus and replayed with `<harness> FILE`.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>


extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv)
    __attribute__((weak));

namespace {

// The input being run, for the crash handler (async-signal-safe: a fixed path, write(2)).
const std::string* current_input = nullptr;
char crash_path[4096];

void WriteCurrentInput(int signal_number) {
  if (current_input != nullptr) {
    const int fd = open(crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      const char* p = current_input->data();
      size_t left = current_input->size();
      while (left > 0) {
        const ssize_t n = write(fd, p, left);
        if (n <= 0) break;
        p += n;
        left -= static_cast<size_t>(n);
      }
      close(fd);
    }
    static const char kSaid[] = "fuzz_driver: the crashing input is in ";
    (void)!write(2, kSaid, sizeof(kSaid) - 1);
    (void)!write(2, crash_path, strlen(crash_path));
    (void)!write(2, "\n", 1);
  }
  signal(signal_number, SIG_DFL);
  raise(signal_number);
}

// splitmix64: a small, seeded, portable generator.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); n > 0.
  size_t Below(size_t n) { return static_cast<size_t>(Next() % n); }

 private:
  uint64_t state_;
};

// Texts that reach the loaders' edges: numbers at the limits of the fields' types, non-finite
// floats, protobuf text and JSON punctuation, .npy header words.
constexpr std::string_view kTokens[] = {
    "0", "1", "-1", "2", "3", "7", "8", "64", "128", "255", "256", "4096", "65535", "65536",
    "4294967295", "4294967296", "9223372036854775807", "18446744073709551615",
    "18446744073709551616", "1e309", "-1e309", "nan", "inf", "-inf", "0x10", "1.5", "-0",
    " ", "\n", "{", "}", "[", "]", ":", ",", "\"", "'", "#", "true", "false", "null",
    "'<f4'", "'<f8'", "'>f4'", "(", ")", "()", "(0,)", "'shape'", "'descr'",
    "'fortran_order'", "True", "False"};

void Mutate(std::string& s, const std::vector<std::string>& corpus, Random& random) {
  const size_t edits = 1 + random.Below(2);
  for (size_t e = 0; e < edits; ++e) {
    const size_t at = s.empty() ? 0 : random.Below(s.size() + 1);
    switch (random.Below(8)) {
      case 0:  // flip a bit
        if (!s.empty()) s[random.Below(s.size())] ^= static_cast<char>(1u << random.Below(8));
        break;
      case 1: {  // set a byte to an interesting value
        static constexpr uint8_t kBytes[] = {0, 1, 0x7f, 0x80, 0xff, '0', '9', '-', '.', 'e'};
        if (!s.empty()) s[random.Below(s.size())] = static_cast<char>(kBytes[random.Below(10)]);
        break;
      }
      case 2:  // insert a token
        s.insert(at, kTokens[random.Below(std::size(kTokens))]);
        break;
      case 3: {  // replace the number at `at` (if any) with a token
        size_t end = at;
        while (end < s.size() && (isdigit(static_cast<unsigned char>(s[end])) || s[end] == '.'))
          ++end;
        s.replace(at, end - at, kTokens[random.Below(20)]);
        break;
      }
      case 4:  // erase a range
        if (!s.empty()) s.erase(at == s.size() ? at - 1 : at, 1 + random.Below(16));
        break;
      case 5: {  // repeat a range
        if (s.empty()) break;
        const size_t from = random.Below(s.size());
        const size_t n = std::min(s.size() - from, 1 + random.Below(32));
        s.insert(at, s.substr(from, n));
        break;
      }
      case 6: {  // splice a range of another corpus entry
        const std::string& other = corpus[random.Below(corpus.size())];
        if (other.empty()) break;
        const size_t from = random.Below(other.size());
        const size_t n = std::min(other.size() - from, 1 + random.Below(64));
        s.replace(at, std::min(s.size() - at, random.Below(64)), other.substr(from, n));
        break;
      }
      default:  // cut the input short
        s.resize(at);
        break;
    }
  }
}

bool ReadFile(const std::filesystem::path& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

void Run(const std::string& input) {
  current_input = &input;
  // A copy of exactly `size` bytes, so that ASan sees a read past the end.
  std::vector<uint8_t> copy(input.begin(), input.end());
  LLVMFuzzerTestOneInput(copy.data(), copy.size());
  current_input = nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t runs = 0;
  uint64_t seed = 1;
  std::vector<std::string> corpus_dirs, files;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with("--runs=")) {
      runs = std::strtoull(argv[i] + 7, nullptr, 10);
    } else if (arg.starts_with("--seed=")) {
      seed = std::strtoull(argv[i] + 7, nullptr, 10);
    } else if (arg.starts_with("--corpus=")) {
      corpus_dirs.emplace_back(arg.substr(9));
    } else if (arg.starts_with("--")) {
      std::fprintf(stderr, "fuzz_driver: unknown flag %s\n", argv[i]);
      return 2;
    } else {
      files.emplace_back(arg);
    }
  }
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);

  const char* out_dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  std::snprintf(crash_path, sizeof(crash_path), "%s/fuzz-crash.bin", out_dir ? out_dir : ".");
  for (int s : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) signal(s, WriteCurrentInput);

  std::vector<std::string> corpus;
  for (const std::string& file : files) {
    std::string bytes;
    if (!ReadFile(file, bytes)) {
      std::fprintf(stderr, "fuzz_driver: cannot read %s\n", file.c_str());
      return 2;
    }
    corpus.push_back(std::move(bytes));
  }
  for (const std::string& dir : corpus_dirs) {
    std::vector<std::filesystem::path> paths;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
      if (entry.is_regular_file()) paths.push_back(entry.path());
    }
    if (error || paths.empty()) {
      std::fprintf(stderr, "fuzz_driver: no corpus files in %s\n", dir.c_str());
      return 2;
    }
    std::sort(paths.begin(), paths.end());
    for (const auto& path : paths) {
      std::string bytes;
      if (!ReadFile(path, bytes)) {
        std::fprintf(stderr, "fuzz_driver: cannot read %s\n", path.c_str());
        return 2;
      }
      corpus.push_back(std::move(bytes));
    }
  }
  if (corpus.empty()) corpus.emplace_back();

  for (const std::string& input : corpus) Run(input);
  Random random(seed);
  for (uint64_t i = 0; i < runs; ++i) {
    std::string input = corpus[random.Below(corpus.size())];
    Mutate(input, corpus, random);
    Run(input);
  }
  std::printf("fuzz_driver: %zu corpus inputs and %llu mutated inputs ran (seed %llu)\n",
              corpus.size(), static_cast<unsigned long long>(runs),
              static_cast<unsigned long long>(seed));
  return 0;
}
