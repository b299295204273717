// Fuzz harness: the command checker (actors/command_check.h) fed arbitrary protobuf commands.
// Input: byte 0 picks the command kind, byte 1 the issuing PE of the small chip, the rest is the
// command's protobuf wire form. Every refusal is one line that starts with the PE's name.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "actors/command_check.h"
#include "proto/commands.pb.h"
#include "tests/fuzz/fuzz_support.h"
#include "topology/ids.h"

namespace {

template <class Cmd>
absl::Status Check(const ahbm::sim::CommandChecker& checker, const uint8_t* data, size_t size) {
  Cmd cmd;
  if (!cmd.ParseFromArray(data, static_cast<int>(size))) return absl::OkStatus();
  return checker.Check(cmd);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ahbm::fuzz::InitHarness();
  ahbm::fuzz::Topology("small");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const ahbm::pb::Chip& chip = ahbm::fuzz::Topology("small");
  static const ahbm::topology::ChipIndex index(chip);
  const ahbm::sim::CommandChecker checker(chip, data[1] % index.num_pes());
  const uint8_t* body = data + 2;
  const size_t body_size = size - 2;
  absl::Status status;
  switch (data[0] % 7) {
    case 0: status = Check<ahbm::pb::CompositeCmd>(checker, body, body_size); break;
    case 1: status = Check<ahbm::pb::GemmCmd>(checker, body, body_size); break;
    case 2: status = Check<ahbm::pb::MathCmd>(checker, body, body_size); break;
    case 3: status = Check<ahbm::pb::SoftmaxPvCmd>(checker, body, body_size); break;
    case 4: status = Check<ahbm::pb::LseMergeCmd>(checker, body, body_size); break;
    case 5: status = Check<ahbm::pb::DmaCmd>(checker, body, body_size); break;
    default: {
      ahbm::pb::TensorRef tensor;
      if (tensor.ParseFromArray(body, static_cast<int>(body_size))) {
        status = checker.CheckTensor(tensor, "operand a");
      }
    }
  }
  if (!status.ok()) {
    const std::string message(status.message());
    if (!absl::StartsWith(message, checker.pe_name()) || message.find('\n') != std::string::npos) {
      ahbm::fuzz::Broken("a refusal that is not one line naming the PE: " + message);
    }
  }
  return 0;
}
