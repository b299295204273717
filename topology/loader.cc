#include "topology/loader.h"

#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/text_proto.h"
#include "topology/validate.h"

namespace ahbm::topology {

absl::StatusOr<pb::Chip> ParseTopologyText(std::string_view text, std::string_view source_name) {
  // Debian's Abseil has its own absl::string_view, which StrCat takes; std::string bridges.
  const std::string source(source_name);
  if (text.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": too large for a topology (", text.size(), " bytes)"));
  }
  pb::Chip chip;
  RETURN_IF_ERROR(ParseTextProto(text, source, &chip));
  if (absl::Status status = Validate(chip); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", status.message()));
  }
  return chip;
}

absl::StatusOr<pb::Chip> LoadTopologyFile(const std::string& path) {
  absl::StatusOr<std::string> contents = ReadTextFile(path, "topology file");
  RETURN_IF_ERROR(contents.status());
  return ParseTopologyText(*contents, path);
}

}  // namespace ahbm::topology
