// Command-line flags of the `ahbm` tool: `--name=value`, or a bare `--name` (= "true") for a
// boolean flag, and the positional arguments of commands that take them (`ahbm diff A B`).
//
// Contract: every flag a command does not declare is an error naming the flag and the
// command; a flag given twice is an error; a flag that takes a value and is given without one
// (`--topology`, `--topology=`) is an error "--<name>: needs a value (--<name>=...)"; a boolean
// flag given with an empty value likewise; an argument that is not a flag is an error unless
// the command takes that many positional arguments; nothing is silently ignored (DESIGN §6).
// A flag declared `repeated` may be given any number of times; its values are kept, in
// command-line order among all repeated flags, in repeated() (`ahbm sweep --param=P
// --values=... --param=Q --values=...`), and Get() does not see them.
#ifndef AHBM_CLI_FLAGS_H_
#define AHBM_CLI_FLAGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace ahbm::cli {

struct FlagSpec {
  std::string name;
  std::string help;
  std::string default_value;  // shown in help; empty = no default
  bool boolean = false;       // true or false; a bare --name means true
  bool repeated = false;      // may be given many times (ParsedFlags::repeated())
};

class ParsedFlags {
 public:
  // The value given on the command line, if any.
  std::optional<std::string> Get(const std::string& name) const;
  // The value given, or the spec's default.
  std::string GetOr(const std::string& name, const std::string& fallback) const;
  const std::map<std::string, std::string>& values() const { return values_; }
  const std::vector<std::string>& positional() const { return positional_; }
  // The repeated flags' (name, value) pairs in command-line order.
  const std::vector<std::pair<std::string, std::string>>& repeated() const { return repeated_; }

 private:
  friend absl::StatusOr<ParsedFlags> ParseFlags(const std::string&, const std::vector<FlagSpec>&,
                                                const std::vector<std::string>&, size_t);
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
  std::vector<std::pair<std::string, std::string>> repeated_;
};

// Parses `args` (everything after the command word) against `specs`; up to `max_positional`
// arguments that do not start with "--" are kept, in order, as positional().
absl::StatusOr<ParsedFlags> ParseFlags(const std::string& command,
                                       const std::vector<FlagSpec>& specs,
                                       const std::vector<std::string>& args,
                                       size_t max_positional = 0);

// A boolean flag: `fallback` when not given, else true or false; InvalidArgument "--<name>:
// must be true or false (got '<text>')" otherwise.
absl::StatusOr<bool> BoolFlag(const ParsedFlags& flags, const std::string& name,
                              bool fallback = false);

// A non-negative integer flag (positive unless `zero_ok`), `fallback` parsed when not given;
// InvalidArgument "--<name>: must be a positive (non-negative) integer (got '<text>')".
absl::StatusOr<uint64_t> IntFlag(const ParsedFlags& flags, const std::string& name,
                                 const std::string& fallback, bool zero_ok = false);

// "  --name=<default>  help" lines for `ahbm help <command>`.
std::string FlagsHelp(const std::vector<FlagSpec>& specs);

}  // namespace ahbm::cli

#endif  // AHBM_CLI_FLAGS_H_
