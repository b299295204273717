#include "milestone/study.h"

#include "absl/strings/str_cat.h"

namespace ahbm::milestone {

std::optional<size_t> CsvTable::Column(std::string_view name) const {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return i;
  }
  return std::nullopt;
}

absl::StatusOr<CsvTable> ParseCsv(std::string_view text) {
  // RFC 4180: fields separated by commas, records by CRLF or LF; a quoted field may hold
  // commas, line breaks and doubled quotes. A final line break ends the last record.
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> record;
  std::string field;
  size_t line = 1;
  size_t record_line = 1;  // where the current record starts
  bool quoted = false;
  bool record_open = false;
  size_t i = 0;
  auto end_record = [&]() -> absl::Status {
    record.push_back(std::move(field));
    field.clear();
    if (!records.empty() && record.size() != records.front().size()) {
      return absl::InvalidArgumentError(absl::StrCat("line ", record_line, ": ", record.size(),
                                                     " fields, the header has ",
                                                     records.front().size()));
    }
    records.push_back(std::move(record));
    record.clear();
    record_open = false;
    return absl::OkStatus();
  };
  while (i < text.size()) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          i += 2;
          continue;
        }
        quoted = false;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      ++i;
      continue;
    }
    if (!record_open) {
      record_open = true;
      record_line = line;
    }
    if (c == '"' && field.empty()) {
      quoted = true;
    } else if (c == ',') {
      record.push_back(std::move(field));
      field.clear();
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (absl::Status s = end_record(); !s.ok()) return s;
      ++line;
    } else {
      field += c;
    }
    ++i;
  }
  if (quoted) {
    return absl::InvalidArgumentError(absl::StrCat("line ", record_line, ": unterminated quote"));
  }
  if (record_open) {
    if (absl::Status s = end_record(); !s.ok()) return s;
  }
  CsvTable table;
  if (records.empty()) return table;
  table.header = std::move(records.front());
  table.rows.assign(std::make_move_iterator(records.begin() + 1),
                    std::make_move_iterator(records.end()));
  return table;
}

}  // namespace ahbm::milestone
