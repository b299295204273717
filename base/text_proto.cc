#include "base/text_proto.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/text_escape.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"

namespace ahbm {
namespace {

// What follows an error position on 0-based `line` of `text`: ` (source line: <the line,
// trimmed, cut to 80 bytes, escaped>)`, ` (at end of input)` when nothing but blanks is left,
// or nothing when the line itself is blank.
std::string SourceContext(std::string_view text, int line) {
  constexpr std::string_view kBlanks = " \t\r\n";
  size_t start = 0;
  for (int i = 0; i < line && start != std::string_view::npos; ++i) {
    start = text.find('\n', start);
    if (start != std::string_view::npos) ++start;
  }
  if (start == std::string_view::npos ||
      text.find_first_not_of(kBlanks, start) == std::string_view::npos) {
    return " (at end of input)";
  }
  std::string_view source = text.substr(start, text.find('\n', start) - start);
  const size_t first = source.find_first_not_of(kBlanks);
  if (first == std::string_view::npos) return "";
  source = source.substr(first, source.find_last_not_of(kBlanks) + 1 - first);
  constexpr size_t kMaxChars = 80;
  const bool cut = source.size() > kMaxChars;
  return absl::StrCat(" (source line: ", PrintableAscii(source.substr(0, kMaxChars)),
                      cut ? "...)" : ")");
}

// Keeps the first error the text-format parser reports, as
// `<source>:<line>:<col>: <message> (source line: <the line's text>)`.
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  FirstErrorCollector(std::string source_name, std::string_view text)
      : source_name_(std::move(source_name)), text_(text) {}

  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (first_error_.has_value()) return;
    // The parser reports 0-based positions, or -1 when an error has no position.
    // Its message may quote a token of the file: escaped and cut like the source line.
    constexpr size_t kMaxMessageChars = 200;
    std::string_view shown = message;
    const bool cut = shown.size() > kMaxMessageChars;
    shown = shown.substr(0, kMaxMessageChars);
    if (line < 0) {
      first_error_ = absl::StrCat(source_name_, ": ", PrintableAscii(shown), cut ? "..." : "");
      return;
    }
    // Protobuf's message may end in a blank (e.g. "got: " followed by an empty token).
    shown = shown.substr(0, shown.find_last_not_of(' ') + 1);
    FieldValuePosition(message, line, column);
    first_error_ = absl::StrCat(source_name_, ":", line + 1, ":", column + 1, ": ",
                                PrintableAscii(shown), cut ? "..." : "", SourceContext(text_, line));
  }

  const std::optional<std::string>& first_error() const { return first_error_; }

 private:
  // An unknown enum value is reported where the parser stood after reading it: the next token,
  // often on a later line. When `message` names the field ("... for field \"model\".") and
  // that field is given on an earlier line (at most 64 back), the position moves to its value.
  void FieldValuePosition(std::string_view message, int& line, int& column) const {
    constexpr std::string_view kFor = "for field \"";
    const size_t at = message.find(kFor);
    if (at == std::string_view::npos) return;
    const size_t name_start = at + kFor.size();
    const size_t name_end = message.find('"', name_start);
    if (name_end == std::string_view::npos || name_end == name_start) return;
    const std::string_view name = message.substr(name_start, name_end - name_start);
    std::vector<std::string_view> lines;  // 0-based, as the parser counts
    for (size_t start = 0;;) {
      const size_t end = text_.find('\n', start);
      lines.push_back(text_.substr(start, end == std::string_view::npos ? end : end - start));
      if (end == std::string_view::npos) break;
      start = end + 1;
    }
    const int last = std::min(line, static_cast<int>(lines.size()) - 1);
    for (int l = last; l >= 0 && l > line - 64; --l) {
      // On the reported line, only what comes before the reported column.
      const std::string_view text =
          l == line ? lines[l].substr(0, static_cast<size_t>(std::max(column, 0))) : lines[l];
      for (size_t p = text.rfind(name); p != std::string_view::npos;
           p = p == 0 ? std::string_view::npos : text.rfind(name, p - 1)) {
        const bool word_start = p == 0 || text[p - 1] == ' ' || text[p - 1] == '\t' ||
                                text[p - 1] == '{';
        size_t v = text.find_first_not_of(" \t", p + name.size());
        if (!word_start || v == std::string_view::npos || text[v] != ':') continue;
        v = text.find_first_not_of(" \t", v + 1);
        line = l;
        column = static_cast<int>(v == std::string_view::npos ? text.size() : v);
        return;
      }
    }
  }


  std::string source_name_;
  std::string_view text_;
  std::optional<std::string> first_error_;
};

absl::Status CannotRead(const std::string& what, const std::string& path, int error) {
  return absl::NotFoundError(absl::StrCat("cannot read ", what, " \"", path,
                                          "\": ", std::generic_category().message(error)));
}

}  // namespace

absl::Status ParseTextProto(std::string_view text, const std::string& source,
                            google::protobuf::Message* message) {
  if (text.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": too large (", text.size(), " bytes)"));
  }
  FirstErrorCollector errors(source, text);
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.AllowUnknownField(/*allow=*/false);
  parser.AllowUnknownExtension(/*allow=*/false);
  google::protobuf::io::ArrayInputStream input(text.data(), static_cast<int>(text.size()));
  if (!parser.Parse(&input, message)) {
    return absl::InvalidArgumentError(errors.first_error().value_or(
        absl::StrCat(source, ": cannot parse ", message->GetDescriptor()->full_name())));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path, const std::string& what) {
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                             &std::fclose);
  if (file == nullptr) return CannotRead(what, path, errno);
  std::string contents;
  char buffer[1 << 16];
  size_t read = 0;
  while ((read = std::fread(buffer, 1, sizeof(buffer), file.get())) > 0) {
    contents.append(buffer, read);
  }
  // fopen() succeeds on a directory; the read then fails (EISDIR).
  if (std::ferror(file.get())) return CannotRead(what, path, errno);
  return contents;
}

}  // namespace ahbm
