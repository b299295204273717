// Reading protobuf text-format files (topologies, workloads) with one-line errors.
//
// Contract:
// - ParseTextProto: unknown fields and extensions are errors; the first parser error is
//   InvalidArgument "<source>:<line>:<col>: <message> (source line: <the line, trimmed, cut at
//   80 bytes>)" — or " (at end of input)" — and "<source>: <message>" without a position.
//   The message (cut at 200 bytes) and the line are printable ASCII: every other byte is
//   written as a C escape (\x89, \t), so a binary file's bytes never reach the terminal.
//   An unknown enum value, which protobuf reports at the token after it (often a later line),
//   is placed at its field's value when the field is named on an earlier line (64 at most).
// - ReadTextFile: the whole file; NotFound "cannot read <what> \"<path>\": <reason>" when it
//   cannot be opened or read (a directory included).
#ifndef AHBMSIM_BASE_TEXT_PROTO_H_
#define AHBMSIM_BASE_TEXT_PROTO_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message.h"

namespace ahbm {

absl::Status ParseTextProto(std::string_view text, const std::string& source,
                            google::protobuf::Message* message);

absl::StatusOr<std::string> ReadTextFile(const std::string& path, const std::string& what);

}  // namespace ahbm

#endif  // AHBMSIM_BASE_TEXT_PROTO_H_
