// What the fuzz harnesses share (tests/fuzz/README.md).
#ifndef AHBMSIM_TESTS_FUZZ_FUZZ_SUPPORT_H_
#define AHBMSIM_TESTS_FUZZ_FUZZ_SUPPORT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "proto/topology.pb.h"

namespace ahbm::fuzz {

// Once per process: a failed AHBM_CHECK aborts (the fuzzer keeps the input), and protobuf's
// parser logging is silenced (a refused input is not news).
void InitHarness();

// Writes `data` to this process's one scratch file (under $TEST_TMPDIR or /tmp) and returns its
// path: for readers that take a path (the .npy reader, `ahbm diff`'s ReadRun).
const std::string& WriteScratchFile(const uint8_t* data, size_t size);

// A checked-in topology (topology/<name>.textproto, from the runfiles root), validated.
const pb::Chip& Topology(std::string_view name);

// A refusal must say why in one line: fails the harness (Broken) on an empty message or one with
// a line break. `status` is not OK.
void CheckRefusal(const absl::Status& status);

// Fails the harness (abort) naming what broke: a harness's own invariant about the code under
// test — e.g. an accepted input whose result is empty.
[[noreturn]] void Broken(std::string_view what);

}  // namespace ahbm::fuzz

#endif  // AHBMSIM_TESTS_FUZZ_FUZZ_SUPPORT_H_
