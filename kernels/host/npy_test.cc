#include "kernels/host/npy.h"

#include <bit>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ahbm::host {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string FloatBytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

// An .npy file as numpy lays it out: magic, version, little-endian header length, the dict
// padded with spaces and a '\n' to a 64-byte boundary, then the data.
std::string NpyFile(const std::string& dict, const std::string& data, int major = 1) {
  const size_t len_width = major == 1 ? 2 : 4;
  std::string header = dict;
  const size_t unpadded = 8 + len_width + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string bytes = "\x93NUMPY";
  bytes.push_back(static_cast<char>(major));
  bytes.push_back('\0');
  for (size_t i = 0; i < len_width; ++i) {
    bytes.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  }
  return bytes + header + data;
}

constexpr char kDict23[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

// The exact bytes numpy 1.24 writes for np.arange(6, dtype='<f4').reshape(2, 3) (later
// versions may pad the header with more spaces, which ReadNpy accepts): a 10-byte prefix, a
// 118-byte header, 24 data bytes.
std::string HandBuilt23() {
  std::string bytes("\x93NUMPY\x01\x00\x76\x00", 10);
  bytes += kDict23;
  bytes.append(58, ' ');
  bytes += '\n';
  return bytes + FloatBytes({0, 1, 2, 3, 4, 5});
}

TEST(NpyTest, ReadsTheBytesNumpyWrites) {
  const std::string path = TempPath("hand_built.npy");
  const std::string bytes = HandBuilt23();
  ASSERT_EQ(bytes.size(), 128u + 24u);
  WriteBytes(path, bytes);
  absl::StatusOr<NpyArray> array = ReadNpy(path);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_THAT(array->shape, ElementsAre(2, 3));
  EXPECT_THAT(array->data, ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_TRUE(ExpectShape(path, *array, {2, 3}).ok());
}

TEST(NpyTest, WritesTheBytesNumpyWrites) {
  const std::string path = TempPath("written.npy");
  const std::vector<float> data = {0, 1, 2, 3, 4, 5};
  ASSERT_TRUE(WriteNpy(path, {2, 3}, data).ok());
  EXPECT_EQ(ReadBytes(path), HandBuilt23());
}

struct RoundTripCase {
  std::string name;
  std::vector<uint64_t> shape;
};

class NpyRoundTripTest : public testing::TestWithParam<RoundTripCase> {};

TEST_P(NpyRoundTripTest, WriteThenReadGivesTheSameBitsAndAnAlignedHeader) {
  const RoundTripCase& c = GetParam();
  uint64_t count = 1;
  for (uint64_t d : c.shape) count *= d;
  std::vector<float> data;
  const float specials[] = {-0.0f, std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::denorm_min(), 1.0f / 3.0f};
  for (uint64_t i = 0; i < count; ++i) {
    data.push_back(i < std::size(specials) ? specials[i] : static_cast<float>(i) * -0.75f);
  }
  const std::string path = TempPath("round_trip_" + c.name + ".npy");
  ASSERT_TRUE(WriteNpy(path, c.shape, data).ok());

  const std::string bytes = ReadBytes(path);
  ASSERT_EQ((bytes.size() - count * 4) % 64, 0u) << "data must start 64-byte aligned";
  EXPECT_EQ(bytes[6], '\x01');  // version 1.0
  EXPECT_EQ(bytes[bytes.size() - count * 4 - 1], '\n');

  absl::StatusOr<NpyArray> array = ReadNpy(path);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->shape, c.shape);
  ASSERT_EQ(array->data.size(), data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(array->data[i]), std::bit_cast<uint32_t>(data[i])) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, NpyRoundTripTest,
    testing::Values(RoundTripCase{"matrix", {2, 3}}, RoundTripCase{"vector", {7}},
                    RoundTripCase{"scalar", {}}, RoundTripCase{"empty", {0, 4}},
                    RoundTripCase{"kv", {2, 33, 5}}, RoundTripCase{"rank6", {1, 2, 1, 3, 1, 2}}),
    [](const testing::TestParamInfo<RoundTripCase>& info) { return info.param.name; });

TEST(NpyTest, HeaderThatEndsOnTheBoundaryGetsNoPadding) {
  // (10, 1, ..., 1) with 20 ones: the dict is 117 bytes, so prefix + dict + '\n' = 128.
  std::vector<uint64_t> shape(21, 1);
  shape[0] = 10;
  const std::vector<float> data(10, 2.5f);
  const std::string path = TempPath("no_padding.npy");
  ASSERT_TRUE(WriteNpy(path, shape, data).ok());
  const std::string bytes = ReadBytes(path);
  ASSERT_EQ(bytes.size(), 128u + 40u);
  EXPECT_EQ(bytes.substr(119, 8), "1, 1), }");
  EXPECT_EQ(bytes[128 - 1], '\n');
  absl::StatusOr<NpyArray> array = ReadNpy(path);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->shape, shape);
  EXPECT_EQ(array->data, data);
}

TEST(NpyTest, AcceptsOtherSpellingsOfTheHeader) {
  struct Variant {
    std::string dict;
    std::vector<uint64_t> shape;
    int major;
  };
  const Variant variants[] = {
      {"{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (3,)}", {3}, 1},
      {"{'shape': (3,), 'fortran_order': False, 'descr': '<f4'}", {3}, 1},
      {"{'descr':'<f4','fortran_order':False,'shape':(1,3,),}", {1, 3}, 1},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3L,), }", {3}, 1},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", {3}, 2},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", {3}, 3},
  };
  for (const Variant& v : variants) {
    const std::string path = TempPath("variant.npy");
    WriteBytes(path, NpyFile(v.dict, FloatBytes({1, 2, 3}), v.major));
    absl::StatusOr<NpyArray> array = ReadNpy(path);
    ASSERT_TRUE(array.ok()) << v.dict << ": " << array.status();
    EXPECT_EQ(array->shape, v.shape) << v.dict;
    EXPECT_THAT(array->data, ElementsAre(1, 2, 3)) << v.dict;
  }
}

struct ErrorCase {
  std::string name;
  std::string bytes;
  std::string message;  // after "<path>: "
};

class NpyErrorTest : public testing::TestWithParam<ErrorCase> {};

TEST_P(NpyErrorTest, IsOneInvalidArgumentLineNamingTheFile) {
  const ErrorCase& c = GetParam();
  const std::string path = TempPath("bad_" + c.name + ".npy");
  WriteBytes(path, c.bytes);
  absl::StatusOr<NpyArray> array = ReadNpy(path);
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(array.status().message()), path + ": " + c.message);
  EXPECT_EQ(std::string(array.status().message()).find('\n'), std::string::npos);
}

std::string Dict(const std::string& descr, const std::string& fortran, const std::string& shape) {
  return "{'descr': " + descr + ", 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

INSTANTIATE_TEST_SUITE_P(
    Files, NpyErrorTest,
    testing::Values(
        ErrorCase{"empty", "", "not an .npy file (no \\x93NUMPY magic)"},
        ErrorCase{"text", "hello, world", "not an .npy file (no \\x93NUMPY magic)"},
        ErrorCase{"version", std::string("\x93NUMPY\x04\x00\x10\x00", 10),
                  "unsupported .npy format version 4.0 (1.0, 2.0 and 3.0 are read)"},
        ErrorCase{"no_length", std::string("\x93NUMPY\x02\x00\x10\x00", 10),
                  "truncated: 10 bytes, the header length alone ends at byte 12"},
        ErrorCase{"short_header", std::string("\x93NUMPY\x01\x00\x76\x00{'descr'", 17),
                  "truncated header: it declares 118 bytes, the file has 7 after the 10-byte "
                  "prefix"},
        ErrorCase{"short_data", NpyFile(kDict23, FloatBytes({0, 1, 2, 3, 4})),
                  "truncated data: shape [2, 3] needs 24 bytes, the file has 20"},
        ErrorCase{"long_data", NpyFile(kDict23, FloatBytes({0, 1, 2, 3, 4, 5, 6})),
                  "4 unexpected bytes after the data of shape [2, 3]"},
        ErrorCase{"huge_shape", NpyFile(Dict("'<f4'", "False", "(4294967296, 4294967296)"), ""),
                  "truncated data: shape [4294967296, 4294967296] needs more than 2^64 bytes, "
                  "the file has 0"},
        ErrorCase{"f8", NpyFile(Dict("'<f8'", "False", "(3,)"), FloatBytes({1, 2, 3, 4, 5, 6})),
                  "dtype '<f8' is not float32 ('<f4')"},
        ErrorCase{"big_endian", NpyFile(Dict("'>f4'", "False", "(3,)"), FloatBytes({1, 2, 3})),
                  "dtype '>f4' is big-endian float32; only little-endian '<f4' is supported "
                  "(save with dtype='<f4')"},
        ErrorCase{"structured",
                  NpyFile(Dict("[('a', '<f4')]", "False", "(3,)"), FloatBytes({1, 2, 3})),
                  "dtype [('a', '<f4')] is not float32 ('<f4')"},
        ErrorCase{"fortran", NpyFile(Dict("'<f4'", "True", "(2, 3)"), FloatBytes({1, 2, 3})),
                  "fortran_order is True; only C-order arrays are supported "
                  "(save np.ascontiguousarray(x))"},
        ErrorCase{"no_brace", NpyFile("'descr': '<f4'", ""),
                  "bad header: expected '{' at header offset 0"},
        ErrorCase{"missing_shape", NpyFile("{'descr': '<f4', 'fortran_order': False}", ""),
                  "bad header: missing key 'shape'"},
        ErrorCase{"unknown_key",
                  NpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}", ""),
                  "bad header: unexpected key 'x' at header offset 61"},
        ErrorCase{"repeated_key", NpyFile("{'descr': '<f4', 'descr': '<f4'}", ""),
                  "bad header: key 'descr' repeated at header offset 26"},
        ErrorCase{"bad_bool", NpyFile(Dict("'<f4'", "false", "(3,)"), ""),
                  "bad header: expected True or False for 'fortran_order' at header offset 34"},
        ErrorCase{"negative_dim", NpyFile(Dict("'<f4'", "False", "(-3,)"), ""),
                  "bad header: expected a non-negative integer in 'shape' at header offset 51"},
        ErrorCase{"int_not_tuple", NpyFile(Dict("'<f4'", "False", "(3)"), ""),
                  "bad header: a one-element shape needs a trailing comma: (n,) at header "
                  "offset 53"},
        ErrorCase{"no_colon", NpyFile("{'descr' '<f4'}", ""),
                  "bad header: expected ':' after key 'descr' at header offset 9"},
        ErrorCase{"trailing_text", NpyFile(Dict("'<f4'", "False", "(3,)") + " x", ""),
                  "bad header: unexpected text after '}' at header offset 58"}),
    [](const testing::TestParamInfo<ErrorCase>& info) { return info.param.name; });

TEST(NpyTest, MissingFileIsNotFound) {
  const std::string path = TempPath("does_not_exist.npy");
  absl::StatusOr<NpyArray> array = ReadNpy(path);
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(array.status().message()), path + ": no such file");
}

TEST(NpyTest, DirectoryCannotBeRead) {
  const std::string path = TempPath("");
  absl::StatusOr<NpyArray> array = ReadNpy(path);
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(array.status().message()), HasSubstr(path + ": cannot read: "));
}

TEST(NpyTest, ExpectShapeNamesBothShapes) {
  NpyArray array{{2, 3}, std::vector<float>(6)};
  const absl::Status status = ExpectShape("q.npy", array, {2, 4});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(status.message()),
            "q.npy: shape [2, 3] does not match the expected [2, 4]");
  EXPECT_TRUE(ExpectShape("q.npy", array, {2, 3}).ok());
}

// NaN or Inf in an input ran to exit 0 with NaN outputs: the first one is named by its index.
TEST(NpyTest, ExpectFiniteNamesTheFirstNonFiniteElement) {
  NpyArray array{{3, 2, 6}, std::vector<float>(36, 1.0f)};
  EXPECT_TRUE(ExpectFinite("x.npy", array).ok());
  array.data[2 * 12 + 0 * 6 + 5] = std::numeric_limits<float>::quiet_NaN();
  array.data[35] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(ExpectFinite("x.npy", array).message(),
            "x.npy: element [2, 0, 5] is NaN (inputs must be finite)");
  array.data[2 * 12 + 5] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(ExpectFinite("x.npy", array).message(),
            "x.npy: element [2, 0, 5] is -inf (inputs must be finite)");
  array.data[2 * 12 + 5] = 0;
  EXPECT_EQ(ExpectFinite("x.npy", array).message(),
            "x.npy: element [2, 1, 5] is inf (inputs must be finite)");
  EXPECT_EQ(ExpectFinite("x.npy", array).code(), absl::StatusCode::kInvalidArgument);
  const NpyArray scalar{{}, {std::numeric_limits<float>::quiet_NaN()}};
  EXPECT_EQ(ExpectFinite("s.npy", scalar).message(),
            "s.npy: element [] is NaN (inputs must be finite)");
}

TEST(NpyTest, WriteRejectsDataThatDoesNotFillTheShape) {
  const std::string path = TempPath("short.npy");
  const std::vector<float> data(5);
  const absl::Status status = WriteNpy(path, {2, 3}, data);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(status.message()),
            path + ": 5 values do not fill shape [2, 3] (6 elements)");
}

TEST(NpyTest, WriteIntoAMissingDirectoryFails) {
  const std::string path = TempPath("no_such_dir/o.npy");
  const std::vector<float> data(1);
  const absl::Status status = WriteNpy(path, {1}, data);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(status.message()), path + ": cannot write: No such file or directory");
}

}  // namespace
}  // namespace ahbm::host
