#include "cli/flags.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ahbm::cli {

std::optional<std::string> ParsedFlags::Get(const std::string& name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string ParsedFlags::GetOr(const std::string& name, const std::string& fallback) const {
  return Get(name).value_or(fallback);
}

absl::StatusOr<bool> BoolFlag(const ParsedFlags& flags, const std::string& name, bool fallback) {
  const std::optional<std::string> text = flags.Get(name);
  if (!text) return fallback;
  if (*text == "true") return true;
  if (*text == "false") return false;
  return absl::InvalidArgumentError(
      absl::StrCat("--", name, ": must be true or false (got '", *text, "')"));
}

absl::StatusOr<uint64_t> IntFlag(const ParsedFlags& flags, const std::string& name,
                                 const std::string& fallback, bool zero_ok) {
  const std::string text = flags.GetOr(name, fallback);
  uint64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || (!zero_ok && value == 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": must be a ",
                                                   zero_ok ? "non-negative" : "positive",
                                                   " integer (got '", text, "')"));
  }
  return value;
}

absl::StatusOr<ParsedFlags> ParseFlags(const std::string& command,
                                       const std::vector<FlagSpec>& specs,
                                       const std::vector<std::string>& args,
                                       size_t max_positional) {
  ParsedFlags parsed;
  for (const std::string& arg : args) {
    if (arg.rfind("--", 0) != 0 && parsed.positional_.size() < max_positional) {
      parsed.positional_.push_back(arg);
      continue;
    }
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unexpected argument '", arg, "' for 'ahbm ", command, "' (flags are --name=value)"));
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const auto spec = std::find_if(specs.begin(), specs.end(),
                                   [&](const FlagSpec& s) { return s.name == name; });
    if (spec == specs.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " for 'ahbm ",
                                                     command, "' (see 'ahbm help ", command,
                                                     "')"));
    }
    if (eq == std::string::npos ? !spec->boolean : eq + 1 == arg.size()) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, ": needs a value (--", name, "=",
                                                     spec->boolean ? "true|false" : "...", ")"));
    }
    const std::string value = eq == std::string::npos ? "true" : arg.substr(eq + 1);
    if (spec->repeated) {
      parsed.repeated_.emplace_back(name, value);
      continue;
    }
    if (!parsed.values_.emplace(name, value).second) {
      return absl::InvalidArgumentError(absl::StrCat("flag --", name, " given twice"));
    }
  }
  return parsed;
}

std::string FlagsHelp(const std::vector<FlagSpec>& specs) {
  std::string out;
  for (const FlagSpec& spec : specs) {
    const std::string left = absl::StrCat(
        "  --", spec.name, spec.default_value.empty() ? "" : "=" + spec.default_value);
    absl::StrAppend(&out, left, std::string(left.size() < 40 ? 40 - left.size() : 1, ' '),
                    spec.help, "\n");
  }
  return out;
}

}  // namespace ahbm::cli
