// Command-line flags of the `ahbm` tool: `--name=value` or a bare `--name` (= "true").
//
// Contract: every flag a command does not declare is an error naming the flag and the
// command; a flag given twice is an error; nothing is silently ignored (DESIGN §6).
#ifndef AHBM_CLI_FLAGS_H_
#define AHBM_CLI_FLAGS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ahbm::cli {

struct FlagSpec {
  std::string name;
  std::string help;
  std::string default_value;  // shown in help; empty = no default
};

class ParsedFlags {
 public:
  // The value given on the command line, if any.
  std::optional<std::string> Get(const std::string& name) const;
  // The value given, or the spec's default.
  std::string GetOr(const std::string& name, const std::string& fallback) const;
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  friend absl::StatusOr<ParsedFlags> ParseFlags(const std::string&, const std::vector<FlagSpec>&,
                                                const std::vector<std::string>&);
  std::map<std::string, std::string> values_;
};

// Parses `args` (everything after the command word) against `specs`.
absl::StatusOr<ParsedFlags> ParseFlags(const std::string& command,
                                       const std::vector<FlagSpec>& specs,
                                       const std::vector<std::string>& args);

// "  --name=<default>  help" lines for `ahbm help <command>`.
std::string FlagsHelp(const std::vector<FlagSpec>& specs);

}  // namespace ahbm::cli

#endif  // AHBM_CLI_FLAGS_H_
