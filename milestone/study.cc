#include "milestone/study.h"

#include "absl/strings/str_cat.h"

namespace ahbm::milestone {

std::optional<size_t> CsvTable::Column(std::string_view name) const {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return i;
  }
  return std::nullopt;
}

// RFC 4180 as base/text_escape.h's CsvField writes it: a field is bare, or quoted with inner
// quotes doubled (then it may hold commas and line breaks); records end with "\n" or "\r\n".
absl::StatusOr<CsvTable> ParseCsv(std::string_view text) {
  std::vector<std::vector<std::string>> records;
  std::vector<size_t> record_lines;  // the line each record begins on
  std::vector<std::string> record;
  std::string field;
  size_t line = 1;         // of the current character
  size_t record_line = 1;  // where the current record began
  size_t i = 0;
  const auto end_record = [&] {
    record.push_back(std::move(field));
    field.clear();
    records.push_back(std::move(record));
    record_lines.push_back(record_line);
    record.clear();
  };
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"' && field.empty()) {
      // A quoted field, up to the quote that is not doubled.
      const size_t open_line = line;
      ++i;
      while (true) {
        if (i >= text.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("line ", open_line, ": unterminated quoted field"));
        }
        if (text[i] == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            field.push_back('"');
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        if (text[i] == '\n') ++line;
        field.push_back(text[i++]);
      }
      if (i < text.size() && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", line, ": text after a closing quote"));
      }
      continue;
    }
    if (c == ',') {
      record.push_back(std::move(field));
      field.clear();
      ++i;
    } else if (c == '\n' || (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n')) {
      i += c == '\r' ? 2 : 1;
      end_record();
      ++line;
      record_line = line;
    } else {
      field.push_back(c);
      ++i;
    }
  }
  if (!field.empty() || !record.empty()) end_record();

  CsvTable table;
  if (records.empty()) return absl::InvalidArgumentError("line 1: no header");
  table.header = std::move(records.front());
  for (size_t r = 1; r < records.size(); ++r) {
    if (records[r].size() != table.header.size()) {
      return absl::InvalidArgumentError(absl::StrCat("line ", record_lines[r], ": ",
                                                     records[r].size(), " fields, the header has ",
                                                     table.header.size()));
    }
    table.rows.push_back(std::move(records[r]));
  }
  return table;
}

}  // namespace ahbm::milestone
