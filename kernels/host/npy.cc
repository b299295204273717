#include "kernels/host/npy.h"

#include <filesystem>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/text_escape.h"

namespace ahbm::host {
namespace {

static_assert(std::endian::native == std::endian::little,
              ".npy '<f4' data is copied as is: the host must be little endian");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
constexpr uint64_t kAlign = 64;

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

absl::Status Error(const std::string& path, std::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", std::string(reason)));
}

// product(shape), or nullopt when it does not fit in 64 bits.
std::optional<uint64_t> CheckedCount(const std::vector<uint64_t>& shape) {
  uint64_t count = 1;
  for (uint64_t d : shape) {
    if (__builtin_mul_overflow(count, d, &count)) return std::nullopt;
  }
  return count;
}

struct Header {
  std::string descr;  // the string, or the raw text of a non-string descr
  bool descr_is_string = true;
  bool fortran_order = false;
  std::vector<uint64_t> shape;
};

// The Python dict literal of an .npy header (see the contract in npy.h).
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  // On failure the message is "bad header: <reason> at header offset <n>" (a missing key has
  // no offset).
  absl::StatusOr<Header> Parse() {
    Header header;
    bool seen_descr = false;
    bool seen_fortran = false;
    bool seen_shape = false;
    SkipSpace();
    if (!Consume('{')) return Fail("expected '{'");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      std::string key;
      if (!ParseString(&key)) return Fail("expected a quoted key or '}'");
      SkipSpace();
      if (!Consume(':')) {
        return Fail(absl::StrCat("expected ':' after key '", PrintableAscii(key), "'"));
      }
      SkipSpace();
      if (key == "descr") {
        if (seen_descr) return Fail("key 'descr' repeated");
        seen_descr = true;
        if (!ParseDescr(&header)) return Fail("expected a dtype string for 'descr'");
      } else if (key == "fortran_order") {
        if (seen_fortran) return Fail("key 'fortran_order' repeated");
        seen_fortran = true;
        if (ConsumeWord("True")) {
          header.fortran_order = true;
        } else if (ConsumeWord("False")) {
          header.fortran_order = false;
        } else {
          return Fail("expected True or False for 'fortran_order'");
        }
      } else if (key == "shape") {
        if (seen_shape) return Fail("key 'shape' repeated");
        seen_shape = true;
        RETURN_IF_ERROR(ParseShape(&header.shape));
      } else {
        return Fail(absl::StrCat("unexpected key '", PrintableAscii(key), "'"));
      }
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume('}')) break;
      return Fail("expected ',' or '}'");
    }
    SkipSpace();
    if (pos_ != text_.size()) return Fail("unexpected text after '}'");
    for (const auto& [seen, key] :
         {std::pair(seen_descr, "descr"), std::pair(seen_fortran, "fortran_order"),
          std::pair(seen_shape, "shape")}) {
      if (!seen) {
        return absl::InvalidArgumentError(absl::StrCat("bad header: missing key '", key, "'"));
      }
    }
    return header;
  }

 private:
  absl::Status Fail(std::string_view reason) const {
    return absl::InvalidArgumentError(
        absl::StrCat("bad header: ", std::string(reason), " at header offset ", pos_));
  }

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }

  void SkipSpace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r')) {
      ++pos_;
    }
  }

  bool Consume(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }

  bool ConsumeWord(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  // A '...' or "..." literal without escapes (numpy never writes any in these keys).
  bool ParseString(std::string* out) {
    const char quote = Peek();
    if (quote != '\'' && quote != '"') return false;
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) return false;
    const std::string_view body = text_.substr(pos_ + 1, end - pos_ - 1);
    if (body.find('\\') != std::string_view::npos) return false;
    *out = std::string(body);
    pos_ = end + 1;
    return true;
  }

  // A string, or a structured dtype's list kept as raw text (so the error can show it).
  bool ParseDescr(Header* header) {
    if (ParseString(&header->descr)) return true;
    if (Peek() != '[') return false;
    int depth = 0;
    const size_t start = pos_;
    for (; !AtEnd(); ++pos_) {
      if (Peek() == '[') ++depth;
      if (Peek() == ']' && --depth == 0) {
        ++pos_;
        header->descr = std::string(text_.substr(start, pos_ - start));
        header->descr_is_string = false;
        return true;
      }
    }
    return false;
  }

  // "()", "(5,)", "(2, 3)", "(2, 3,)"; Python 2's "2L" is accepted.
  absl::Status ParseShape(std::vector<uint64_t>* shape) {
    if (!Consume('(')) return Fail("expected a tuple for 'shape'");
    SkipSpace();
    if (Consume(')')) return absl::OkStatus();
    while (true) {
      uint64_t dim = 0;
      if (Peek() < '0' || Peek() > '9') return Fail("expected a non-negative integer in 'shape'");
      while (Peek() >= '0' && Peek() <= '9') {
        if (__builtin_mul_overflow(dim, uint64_t{10}, &dim) ||
            __builtin_add_overflow(dim, static_cast<uint64_t>(Peek() - '0'), &dim)) {
          return Fail("dimension in 'shape' does not fit in 64 bits");
        }
        ++pos_;
      }
      Consume('L');
      shape->push_back(dim);
      SkipSpace();
      if (Consume(')')) {
        if (shape->size() == 1) return Fail("a one-element shape needs a trailing comma: (n,)");
        return absl::OkStatus();
      }
      if (!Consume(',')) return Fail("expected ',' or ')' in 'shape'");
      SkipSpace();
      if (Consume(')')) return absl::OkStatus();
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// Python's repr of a tuple of ints: "()", "(5,)", "(2, 3)".
std::string PythonTuple(const std::vector<uint64_t>& shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

uint32_t LoadLe(std::string_view bytes, size_t offset, size_t width) {
  uint32_t value = 0;
  for (size_t i = 0; i < width; ++i) {
    value |= uint32_t{static_cast<uint8_t>(bytes[offset + i])} << (8 * i);
  }
  return value;
}

absl::StatusOr<NpyArray> ParseNpy(const std::string& path, std::string_view bytes) {
  if (bytes.size() < kMagicBytes + 2 || bytes.substr(0, kMagicBytes) != kMagic) {
    return Error(path, "not an .npy file (no \\x93NUMPY magic)");
  }
  const int major = static_cast<uint8_t>(bytes[6]);
  const int minor = static_cast<uint8_t>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0) {
    return Error(path, absl::StrCat("unsupported .npy format version ", major, ".", minor,
                                    " (1.0, 2.0 and 3.0 are read)"));
  }
  const size_t len_width = major == 1 ? 2 : 4;
  const size_t prefix = kMagicBytes + 2 + len_width;
  if (bytes.size() < prefix) {
    return Error(path, absl::StrCat("truncated: ", bytes.size(),
                                    " bytes, the header length alone ends at byte ", prefix));
  }
  const uint64_t header_len = LoadLe(bytes, kMagicBytes + 2, len_width);
  if (bytes.size() - prefix < header_len) {
    return Error(path,
                 absl::StrCat("truncated header: it declares ", header_len, " bytes, the file has ",
                              bytes.size() - prefix, " after the ", prefix, "-byte prefix"));
  }
  absl::StatusOr<Header> header = HeaderParser(bytes.substr(prefix, header_len)).Parse();
  if (!header.ok()) return Error(path, std::string(header.status().message()));
  if (header->descr != "<f4" || !header->descr_is_string) {
    if (header->descr == ">f4") {
      return Error(path,
                   "dtype '>f4' is big-endian float32; only little-endian '<f4' is "
                   "supported (save with dtype='<f4')");
    }
    const std::string shown =
        header->descr_is_string ? absl::StrCat("'", PrintableAscii(header->descr), "'")
                                : PrintableAscii(header->descr);
    return Error(path, absl::StrCat("dtype ", shown, " is not float32 ('<f4')"));
  }
  if (header->fortran_order) {
    return Error(path,
                 "fortran_order is True; only C-order arrays are supported "
                 "(save np.ascontiguousarray(x))");
  }
  const std::optional<uint64_t> count = CheckedCount(header->shape);
  const uint64_t data_bytes = bytes.size() - prefix - header_len;
  if (!count.has_value() || *count > data_bytes / sizeof(float)) {
    return Error(path, absl::StrCat("truncated data: shape ", ShapeString(header->shape), " needs ",
                                    count.has_value() ? absl::StrCat(*count * 4)
                                                      : std::string("more than 2^64"),
                                    " bytes, the file has ", data_bytes));
  }
  if (data_bytes != *count * sizeof(float)) {
    return Error(path, absl::StrCat(data_bytes - *count * sizeof(float),
                                    " unexpected bytes after the data of shape ",
                                    ShapeString(header->shape)));
  }
  NpyArray array;
  array.shape = std::move(header->shape);
  array.data.resize(*count);
  if (*count > 0) std::memcpy(array.data.data(), bytes.data() + prefix + header_len, data_bytes);
  return array;
}

}  // namespace

std::string ShapeString(const std::vector<uint64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<NpyArray> ReadNpy(const std::string& path) {
  errno = 0;
  File file(std::fopen(path.c_str(), "rb"));
  if (file == nullptr) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    }
    return Error(path, absl::StrCat("cannot read: ", std::strerror(errno)));
  }
  std::string bytes;
  char buffer[1 << 16];
  while (true) {
    const size_t got = std::fread(buffer, 1, sizeof(buffer), file.get());
    bytes.append(buffer, got);
    if (got < sizeof(buffer)) break;
  }
  if (std::ferror(file.get())) {
    return Error(path, absl::StrCat("cannot read: ", std::strerror(errno)));
  }
  return ParseNpy(path, bytes);
}

absl::Status WriteNpy(const std::string& path, const std::vector<uint64_t>& shape,
                      std::span<const float> data) {
  const std::optional<uint64_t> count = CheckedCount(shape);
  if (!count.has_value() || *count != data.size()) {
    return Error(path, absl::StrCat(data.size(), " values do not fill shape ", ShapeString(shape),
                                    count.has_value() ? absl::StrCat(" (", *count, " elements)")
                                                      : std::string(" (over 2^64 elements)")));
  }
  std::string dict =
      absl::StrCat("{'descr': '<f4', 'fortran_order': False, 'shape': ", PythonTuple(shape), ", }");
  // Version 1.0 stores the header length in 16 bits; 2.0 in 32.
  const bool v1 = kMagicBytes + 2 + 2 + dict.size() + 1 <= 0xffff;
  const size_t prefix = kMagicBytes + 2 + (v1 ? 2 : 4);
  const size_t unpadded = prefix + dict.size() + 1;  // + '\n'
  dict.append((kAlign - unpadded % kAlign) % kAlign, ' ');
  dict.push_back('\n');

  std::string bytes(kMagic, kMagicBytes);
  bytes.push_back(static_cast<char>(v1 ? 1 : 2));
  bytes.push_back('\0');
  for (size_t i = 0; i < (v1 ? 2u : 4u); ++i) {
    bytes.push_back(static_cast<char>((dict.size() >> (8 * i)) & 0xff));
  }
  bytes += dict;

  errno = 0;
  File file(std::fopen(path.c_str(), "wb"));
  if (file == nullptr) return Error(path, absl::StrCat("cannot write: ", std::strerror(errno)));
  const size_t data_bytes = data.size() * sizeof(float);
  if (std::fwrite(bytes.data(), 1, bytes.size(), file.get()) != bytes.size() ||
      (data_bytes > 0 && std::fwrite(data.data(), 1, data_bytes, file.get()) != data_bytes) ||
      std::fclose(file.release()) != 0) {
    return Error(path, absl::StrCat("cannot write: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status ExpectShape(const std::string& path, const NpyArray& array,
                         const std::vector<uint64_t>& expected) {
  if (array.shape == expected) return absl::OkStatus();
  return Error(path, absl::StrCat("shape ", ShapeString(array.shape),
                                  " does not match the expected ", ShapeString(expected)));
}

absl::Status ExpectFinite(const std::string& path, const NpyArray& array) {
  const auto bad = std::find_if(array.data.begin(), array.data.end(),
                                [](float x) { return !std::isfinite(x); });
  if (bad == array.data.end()) return absl::OkStatus();
  // The flat (row-major) position as an index into the shape, last dimension fastest.
  uint64_t flat = static_cast<uint64_t>(bad - array.data.begin());
  std::vector<uint64_t> index(array.shape.size());
  for (size_t i = index.size(); i-- > 0;) {
    index[i] = flat % array.shape[i];
    flat /= array.shape[i];
  }
  const char* what = std::isnan(*bad) ? "NaN" : (*bad > 0 ? "inf" : "-inf");
  return Error(path, absl::StrCat("element ", ShapeString(index), " is ", what,
                                  " (inputs must be finite)"));
}

std::string NpyPath(const std::string& dir, const std::string& stem) {
  return (std::filesystem::path(dir) / (stem + ".npy")).string();
}

}  // namespace ahbm::host
