// Text escaping for the files the tool writes (report CSV, Chrome trace, sweep and milestone
// CSV / JSON) and for input text quoted in error messages: one rule each, so every file and
// message quotes the same way.
#ifndef AHBMSIM_BASE_TEXT_ESCAPE_H_
#define AHBMSIM_BASE_TEXT_ESCAPE_H_

#include <string>
#include <string_view>

namespace ahbm {

// An RFC 4180 CSV field: as is, or in double quotes (inner quotes doubled) when it holds a
// comma, a quote or a line break.
std::string CsvField(std::string_view text);

// `text` as a JSON string literal, quotes included: \" \\ \n \r \t, other control characters
// as \u00XX; bytes from 0x80 pass through (UTF-8 stays UTF-8).
void AppendJsonString(std::string* out, std::string_view text);
std::string JsonString(std::string_view text);

// Input text as an error message quotes it: printable ASCII as is, every other byte as a C
// escape (\n, \t, \x89), so a message stays one line and a binary file's bytes never reach the
// terminal.
std::string PrintableAscii(std::string_view text);

}  // namespace ahbm

#endif  // AHBMSIM_BASE_TEXT_ESCAPE_H_
