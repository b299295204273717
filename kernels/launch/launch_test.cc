// RunWorkload (launch.h): the self-test kernels end to end — data mode against C++ references
// from the same inputs, timing mode against data mode, the deadlock report, and every
// validation error.
#include "kernels/launch/launch.h"

#include "kernels/launch/decode_run.h"
#include "kernels/launch/launcher.h"
#include "kernels/launch/workload_io.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/errors.h"
#include "actors/observe/op_log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/host/npy.h"
#include "kernels/memory/memory_store.h"
#include "proto/trace.pb.h"
#include "topology/loader.h"

namespace ahbm::launch {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

pb::Chip LoadChip(const std::string& name) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/" + name + ".textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  return *chip;
}

// A fresh directory under TEST_TMPDIR.
std::string TmpDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  const std::filesystem::path dir = std::filesystem::path(root ? root : "/tmp") / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);  // not bf16-representable: the store rounds
  return v;
}

void WriteNpyOrDie(const std::string& path, const std::vector<uint64_t>& shape,
                   const std::vector<float>& data) {
  ASSERT_TRUE(host::WriteNpy(path, shape, data).ok()) << path;
}

pb::Workload Gemm(uint32_t m, uint32_t k, uint32_t n, uint32_t cube = 0, bool data = true) {
  pb::Workload w;
  w.set_kernel(pb::SELFTEST_GEMM);
  w.set_gemm_m(m);
  w.set_gemm_k(k);
  w.set_gemm_n(n);
  w.set_cube(cube);
  w.set_data(data);
  return w;
}

pb::Workload AllReduce(uint32_t len, uint32_t cube = 0, bool data = true) {
  pb::Workload w;
  w.set_kernel(pb::SELFTEST_ALLREDUCE);
  w.set_vector_len(len);
  w.set_cube(cube);
  w.set_data(data);
  return w;
}

// out = round_bf16(a) · round_bf16(b), accumulated in double.
std::vector<double> GemmReference(const std::vector<float>& a, const std::vector<float>& b,
                                  uint64_t m, uint64_t k, uint64_t n) {
  std::vector<double> out(m * n, 0.0);
  for (uint64_t i = 0; i < m; ++i) {
    for (uint64_t t = 0; t < k; ++t) {
      const double x = kernels::RoundToBf16(a[i * k + t]);
      for (uint64_t j = 0; j < n; ++j) out[i * n + j] += x * kernels::RoundToBf16(b[t * n + j]);
    }
  }
  return out;
}

std::string SerializedLog(const LaunchResult& r) {
  std::string out;
  for (const pb::TraceRecord& record : r.op_log) out += record.SerializeAsString();
  return out;
}

TEST(RunWorkload, SelftestGemmDataModeMatchesTheReference) {
  const pb::Chip chip = LoadChip("small");
  const uint64_t m = 16, k = 96, n = 200;
  const std::string in = TmpDir("gemm_in"), out = TmpDir("gemm_out");
  const std::vector<float> a = Random(m * k, 1), b = Random(k * n, 2);
  WriteNpyOrDie(in + "/a.npy", {m, k}, a);
  WriteNpyOrDie(in + "/b.npy", {k, n}, b);
  LaunchOptions options;
  options.inputs_dir = in;
  options.outputs_dir = out;
  absl::StatusOr<LaunchResult> r = RunWorkload(chip, Gemm(m, k, n, /*cube=*/5), options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->runtime_status.ok()) << r->runtime_status;
  absl::StatusOr<host::NpyArray> o = host::ReadNpy(out + "/o.npy");
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->shape, (std::vector<uint64_t>{m, n}));
  EXPECT_EQ(o->data, r->outputs.at("o").data);
  const std::vector<double> want = GemmReference(a, b, m, k, n);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(o->data[i], want[i], 1e-3) << i;
  // It ran on CUBE 5's PE 0: that PE's GEMM engine did the work.
  bool gemm = false;
  for (const pb::UnitStats& u : r->report.units()) {
    gemm = gemm || (u.unit_name() == "sip0.cube5.pe0.gemm" && u.flops() == 2 * m * k * n);
  }
  EXPECT_TRUE(gemm);
  EXPECT_THAT(r->report.workload_summary(), HasSubstr("selftest_gemm"));
}

TEST(RunWorkload, SelftestGemmInputsFromTheSeedAreDeterministic) {
  const pb::Chip chip = LoadChip("small");
  pb::Workload w = Gemm(8, 128, 256);
  w.set_seed(7);
  absl::StatusOr<LaunchResult> r1 = RunWorkload(chip, w, {});
  absl::StatusOr<LaunchResult> r2 = RunWorkload(chip, w, {});
  w.set_seed(8);
  absl::StatusOr<LaunchResult> r3 = RunWorkload(chip, w, {});
  ASSERT_TRUE(r1.ok() && r2.ok() && r3.ok());
  EXPECT_EQ(r1->outputs.at("o").data, r2->outputs.at("o").data);
  EXPECT_NE(r1->outputs.at("o").data, r3->outputs.at("o").data);
  // The inputs the kernel saw: in [-1, 1], already bf16; the output is their product.
  const std::vector<float>& a = r1->inputs.at("a").data;
  const std::vector<float>& b = r1->inputs.at("b").data;
  for (float x : a) {
    EXPECT_LE(std::abs(x), 1.0f);
    EXPECT_EQ(x, kernels::RoundToBf16(x));
  }
  const std::vector<double> want = GemmReference(a, b, 8, 128, 256);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(r1->outputs.at("o").data[i], want[i], 1e-3);
}

// Ring all-reduce over IPCQ: a 2x2 PE mesh (small) and a 2x4 one (chip_2sip); a vector larger
// than an IPCQ queue streams through because every receive is posted before the send.
class AllReduceTest : public ::testing::TestWithParam<std::tuple<std::string, uint32_t>> {};

TEST_P(AllReduceTest, EveryPeEndsWithTheSum) {
  const auto& [topology, len] = GetParam();
  const pb::Chip chip = LoadChip(topology);
  const uint64_t p = chip.sip().cube().pes();
  const std::string in = TmpDir("allreduce_in_" + topology);
  const std::string out = TmpDir("allreduce_out_" + topology);
  const std::vector<float> x = Random(p * len, 3);
  WriteNpyOrDie(in + "/x.npy", {p, len}, x);
  LaunchOptions options;
  options.inputs_dir = in;
  options.outputs_dir = out;
  absl::StatusOr<LaunchResult> r = RunWorkload(chip, AllReduce(len, /*cube=*/1), options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->runtime_status.ok()) << r->runtime_status;
  absl::StatusOr<host::NpyArray> o = host::ReadNpy(out + "/o.npy");
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->shape, (std::vector<uint64_t>{p, len}));
  for (uint64_t i = 0; i < len; ++i) {
    double sum = 0;
    for (uint64_t row = 0; row < p; ++row) sum += x[row * len + i];
    for (uint64_t row = 0; row < p; ++row) {
      ASSERT_NEAR(o->data[row * len + i], sum, 1e-5 * p) << "pe " << row << " element " << i;
    }
  }
  // The ring uses one IPCQ queue per PE, each carrying P - 1 messages of the vector.
  int queues = 0;
  for (const pb::UnitStats& u : r->report.units()) {
    if (u.kind() != "ipcq") continue;
    ++queues;
    EXPECT_EQ(u.ops(), p - 1) << u.unit_name();
    EXPECT_EQ(u.bytes_written(), (p - 1) * len * 4) << u.unit_name();
  }
  EXPECT_EQ(queues, static_cast<int>(p));
}

INSTANTIATE_TEST_SUITE_P(Meshes, AllReduceTest,
                         ::testing::Values(std::make_tuple("small", 1000u),
                                           std::make_tuple("chip_2sip", 1000u),
                                           std::make_tuple("small", 100000u)));

TEST(RunWorkload, TimingModeAndDataModeGiveIdenticalOpLogs) {
  const pb::Chip chip = LoadChip("chip_2sip");
  for (pb::Workload w : {Gemm(24, 200, 300, 3), AllReduce(5000, 17)}) {
    w.set_issue_cost_profile("realistic");
    std::string logs[2];
    for (int data = 0; data < 2; ++data) {
      w.set_data(data == 1);
      absl::StatusOr<LaunchResult> r = RunWorkload(chip, w, {});
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_TRUE(r->runtime_status.ok()) << r->runtime_status;
      EXPECT_EQ(r->outputs.empty(), data == 0);
      logs[data] = SerializedLog(*r);
    }
    EXPECT_FALSE(logs[0].empty());
    EXPECT_EQ(logs[0], logs[1]) << pb::Kernel_Name(w.kernel());
  }
}

TEST(RunWorkload, TraceStreamsTheOpLog) {
  const pb::Chip chip = LoadChip("small");
  LaunchOptions options;
  options.trace_path = TmpDir("trace") + "/op.pb";
  absl::StatusOr<LaunchResult> r = RunWorkload(chip, AllReduce(256, 0, false), options);
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<std::vector<pb::TraceRecord>> read = observe::ReadOpLogFile(options.trace_path);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), r->op_log.size());
  for (size_t i = 0; i < read->size(); ++i) {
    EXPECT_EQ((*read)[i].SerializeAsString(), r->op_log[i].SerializeAsString()) << i;
  }
}

TEST(RunWorkload, DeadlockNamesEveryWaitingPe) {
  for (const std::string topology : {"small", "chip_2sip"}) {
    const pb::Chip chip = LoadChip(topology);
    pb::Workload w;
    w.set_kernel(pb::SELFTEST_DEADLOCK);
    w.set_cube(2);
    absl::StatusOr<LaunchResult> r = RunWorkload(chip, w, {});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(KindOf(r->runtime_status), ErrorKind::kDeadlock) << r->runtime_status;
    const std::string message(r->runtime_status.message());
    EXPECT_THAT(message, AllOf(StartsWith("deadlock"), Not(HasSubstr("\n"))));
    for (uint32_t p = 0; p < chip.sip().cube().pes(); ++p) {
      EXPECT_THAT(message, HasSubstr("sip0.cube2.pe" + std::to_string(p) + ")")) << topology;
    }
    EXPECT_THAT(message, HasSubstr("recv"));
    EXPECT_TRUE(r->outputs.empty());
  }
}

// Writes a float64 .npy by hand ('<f8': a dtype ReadNpy refuses).
void WriteF8Npy(const std::string& path) {
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }";
  header.append(128 - 10 - header.size() - 1, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  const char len[2] = {static_cast<char>(header.size()), 0};
  f.write(len, 2);
  f << header;
  f << std::string(4 * 8, '\0');
}

struct BadCase {
  std::string name;
  std::function<void(pb::Workload&, LaunchOptions&)> mutate;
  absl::StatusCode code;
  std::string message;  // a substring of the one-line error
};

TEST(RunWorkload, EveryBadInputIsOneLineNamingTheFieldOrFile) {
  const pb::Chip chip = LoadChip("small");
  const std::string dir = TmpDir("bad_inputs");
  WriteNpyOrDie(dir + "/a.npy", {8, 128}, Random(8 * 128, 4));
  WriteNpyOrDie(dir + "/b.npy", {128, 255}, Random(128 * 255, 5));  // wrong shape
  const std::string f8 = TmpDir("f8_inputs");
  WriteF8Npy(f8 + "/a.npy");
  const std::string empty = TmpDir("no_inputs");
  using absl::StatusCode;
  const std::vector<BadCase> cases = {
      {"kernel unset", [](pb::Workload& w, LaunchOptions&) { w.clear_kernel(); },
       StatusCode::kInvalidArgument, "kernel: must be set (implemented: DECODE, PREFILL, SELFTEST_GEMM"},
      {"prefill", [](pb::Workload& w, LaunchOptions&) { w.set_kernel(pb::PREFILL); },
       StatusCode::kInvalidArgument, "gemm_m: not used by PREFILL (got 8); leave it unset"},
      {"unknown kernel number",
       [](pb::Workload& w, LaunchOptions&) { w.set_kernel(static_cast<pb::Kernel>(99)); },
       StatusCode::kInvalidArgument, "kernel: unknown value 99"},
      {"gemm_m", [](pb::Workload& w, LaunchOptions&) { w.set_gemm_m(0); },
       StatusCode::kInvalidArgument, "gemm_m: must be > 0 (got 0)"},
      {"gemm_k", [](pb::Workload& w, LaunchOptions&) { w.set_gemm_k(0); },
       StatusCode::kInvalidArgument, "gemm_k: must be > 0 (got 0)"},
      {"gemm_n", [](pb::Workload& w, LaunchOptions&) { w.set_gemm_n(0); },
       StatusCode::kInvalidArgument, "gemm_n: must be > 0 (got 0)"},
      {"gemm scratch", [](pb::Workload& w, LaunchOptions&) { w.set_gemm_n(1 << 20); },
       StatusCode::kInvalidArgument,
       "gemm_m, gemm_k, gemm_n: A [8, 128] bf16 and out [8, 1048576] fp32 do not fit the PE's "
       "TCM scratch arena (1048576 B)"},
      {"gemm hbm",
       [](pb::Workload& w, LaunchOptions&) {
         w.set_gemm_m(1);
         w.set_gemm_k(65536);
         w.set_gemm_n(65536);
       },
       StatusCode::kInvalidArgument,
       "gemm_k, gemm_n: B [65536, 65536] bf16 with A and out does not fit the PE's HBM region "
       "(4294967296 B)"},
      {"cube", [](pb::Workload& w, LaunchOptions&) { w.set_cube(99); },
       StatusCode::kInvalidArgument, "cube: 99 is outside the chip's 8 CUBEs"},
      {"unused field", [](pb::Workload& w, LaunchOptions&) { w.set_h_q(64); },
       StatusCode::kInvalidArgument, "h_q: not used by SELFTEST_GEMM (got 64); leave it unset"},
      {"unused enum", [](pb::Workload& w, LaunchOptions&) { w.set_variant(pb::OPT3); },
       StatusCode::kInvalidArgument, "variant: not used by SELFTEST_GEMM (got OPT3)"},
      {"vector_len on gemm", [](pb::Workload& w, LaunchOptions&) { w.set_vector_len(4); },
       StatusCode::kInvalidArgument, "vector_len: not used by SELFTEST_GEMM"},
      {"vector_len 0",
       [](pb::Workload& w, LaunchOptions&) {
         w = AllReduce(0);
       },
       StatusCode::kInvalidArgument, "vector_len: must be > 0 (got 0)"},
      {"vector_len too long", [](pb::Workload& w, LaunchOptions&) { w = AllReduce(300000); },
       StatusCode::kInvalidArgument, "vector_len: 300000 fp32 elements do not fit the PE's TCM"},
      {"profile", [](pb::Workload& w, LaunchOptions&) { w.set_issue_cost_profile("fast"); },
       StatusCode::kInvalidArgument, "issue_cost_profile: the chip has no profile named 'fast'"},
      {"inputs_dir in timing mode",
       [&](pb::Workload& w, LaunchOptions& o) {
         w.set_data(false);
         o.inputs_dir = dir;
       },
       StatusCode::kInvalidArgument, "inputs_dir: needs data mode (the workload's data is false)"},
      {"outputs_dir in timing mode",
       [&](pb::Workload& w, LaunchOptions& o) {
         w.set_data(false);
         o.outputs_dir = dir;
       },
       StatusCode::kInvalidArgument, "outputs_dir: needs data mode"},
      {"deadlock has no inputs",
       [&](pb::Workload& w, LaunchOptions& o) {
         w.Clear();
         w.set_kernel(pb::SELFTEST_DEADLOCK);
         w.set_data(true);
         o.inputs_dir = dir;
       },
       StatusCode::kInvalidArgument, "inputs_dir: SELFTEST_DEADLOCK has none"},
      {"missing npy", [&](pb::Workload&, LaunchOptions& o) { o.inputs_dir = empty; },
       StatusCode::kNotFound, empty + "/a.npy: no such file"},
      {"missing x.npy",
       [&](pb::Workload& w, LaunchOptions& o) {
         w = AllReduce(16);
         o.inputs_dir = empty;
       },
       StatusCode::kNotFound, empty + "/x.npy: no such file"},
      {"wrong shape", [&](pb::Workload&, LaunchOptions& o) { o.inputs_dir = dir; },
       StatusCode::kInvalidArgument,
       dir + "/b.npy: shape [128, 255] does not match the expected [128, 256]"},
      {"wrong dtype", [&](pb::Workload&, LaunchOptions& o) { o.inputs_dir = f8; },
       StatusCode::kInvalidArgument, f8 + "/a.npy: dtype '<f8' is not float32"},
      {"unwritable trace",
       [&](pb::Workload&, LaunchOptions& o) { o.trace_path = empty + "/no/such/dir/op.pb"; },
       StatusCode::kInvalidArgument, "trace: cannot write " + empty + "/no/such/dir/op.pb"},
  };
  for (const BadCase& c : cases) {
    pb::Workload w = Gemm(8, 128, 256);
    LaunchOptions options;
    c.mutate(w, options);
    absl::StatusOr<LaunchResult> r = RunWorkload(chip, w, options);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), c.code) << c.name << ": " << r.status();
    const std::string message(r.status().message());
    EXPECT_THAT(message, HasSubstr(c.message)) << c.name;
    EXPECT_THAT(message, Not(HasSubstr("\n"))) << c.name;
  }
}

TEST(ValidateWorkload, MeshesWithoutAnIpcqRingAreRefused) {
  pb::Chip chip = LoadChip("small");
  chip.mutable_sip()->mutable_cube()->set_pes(9);
  chip.mutable_sip()->mutable_cube()->mutable_pe_mesh()->set_rows(3);
  chip.mutable_sip()->mutable_cube()->mutable_pe_mesh()->set_cols(3);
  const absl::Status s = ValidateWorkload(chip, AllReduce(16));
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("the chip's 3x3 PE mesh has none"));
}

// The short/long decode dispatcher (variant AUTO): below the threshold whole heads per CUBE
// and no NOC traffic (the short-context kernel), from it on the long-context kernel (default
// C = 8) with its Level-1 reduce over the NOC.
pb::Workload SmallAuto(uint64_t s) {
  pb::Workload w;
  w.set_kernel(pb::DECODE);
  w.set_variant(pb::AUTO);
  w.set_h_q(8);
  w.set_h_kv(1);
  w.set_d(64);
  w.set_s(s);
  w.set_p(4);
  w.set_tile(64);
  return w;
}

int NocSends(const LaunchResult& result) {
  int sends = 0;
  for (const pb::TraceRecord& r : result.op_log) {
    if (r.has_op() && r.op().op() == "send_noc") ++sends;
  }
  return sends;
}

// AUTO's choice (the typed AutoChoice and the resolved config), and the run is that kernel's:
// the short kernel sends nothing over the NOC, OPT3 one Level-1 triplet per non-root CUBE.
TEST(RunWorkload, AutoDispatchesByContextLength) {
  const pb::Chip chip = LoadChip("small");
  for (uint64_t s : {kShortLongThreshold - 1, kShortLongThreshold}) {
    const bool short_kernel = s < kShortLongThreshold;
    const AutoChoice pick = DispatchAuto(SmallAuto(s), s);
    EXPECT_EQ(pick.variant, short_kernel ? pb::SHORT_CONTEXT : pb::OPT3) << s;
    EXPECT_EQ(pick.threshold, kShortLongThreshold);
    absl::StatusOr<kernels::DecodeConfig> cfg = DecodeConfigOf(chip, SmallAuto(s));
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    EXPECT_EQ(cfg->c, short_kernel ? 1u : 8u) << s;
    absl::StatusOr<LaunchResult> result = RunWorkload(chip, SmallAuto(s), LaunchOptions{});
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_TRUE(result->runtime_status.ok()) << result->runtime_status;
    EXPECT_EQ(NocSends(*result), short_kernel ? 0 : 3 * 7) << s;
  }
  // The workload's threshold moves the pick.
  pb::Workload w = SmallAuto(100);
  w.set_short_long_threshold(64);
  const AutoChoice pick = DispatchAuto(w, 100);
  EXPECT_EQ(pick.variant, pb::OPT3);
  EXPECT_EQ(pick.threshold, 64u);
  absl::StatusOr<LaunchResult> result = RunWorkload(chip, w, LaunchOptions{});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(NocSends(*result), 3 * 7);
}

// The report's workload line says what AUTO picked and why, in the user's words.
TEST(RunWorkload, AutoSummarySaysWhatItPickedAndWhy) {
  const pb::Chip chip = LoadChip("small");
  absl::StatusOr<LaunchResult> below = RunWorkload(chip, SmallAuto(2048), LaunchOptions{});
  ASSERT_TRUE(below.ok()) << below.status();
  EXPECT_THAT(below->report.workload_summary(),
              AllOf(HasSubstr("decode AUTO -> SHORT_CONTEXT (S 2048 < threshold 2049; kv_per_cube "
                              "1, the fewest KV heads per CUBE that host the KV head"),
                    HasSubstr(", C 1,")));
  pb::Workload w = SmallAuto(100);
  w.set_short_long_threshold(64);
  absl::StatusOr<LaunchResult> above = RunWorkload(chip, w, LaunchOptions{});
  ASSERT_TRUE(above.ok()) << above.status();
  EXPECT_THAT(above->report.workload_summary(),
              AllOf(HasSubstr("decode AUTO -> OPT3 (S 100 >= threshold 64)"), HasSubstr(", C 8,")));
}

// AUTO never silently overrides a field: what it would override is refused in one line.
TEST(ValidateWorkload, AutoRefusesFieldsItWouldOverride) {
  const pb::Chip chip = LoadChip("small");
  const struct {
    std::function<void(pb::Workload&)> mutate;
    std::string message;
  } cases[] = {
      {[](pb::Workload& w) { w.set_c(2); },
       "c: AUTO picks the kernel and its C; leave c unset or choose a variant"},
      {[](pb::Workload& w) { w.set_c(1); },
       "c: AUTO picks the kernel and its C; leave c unset or choose a variant"},
      {[](pb::Workload& w) { w.set_group_rows(1); }, "group_rows: AUTO picks the kernel and its C"},
      {[](pb::Workload& w) { w.set_kv_per_cube(1); },
       "kv_per_cube: AUTO picks OPT3 (S 4096 >= threshold 2049), which does not use it"},
      {[](pb::Workload& w) {
         w.set_variant(pb::OPT3);
         w.set_short_long_threshold(10);
       },
       "short_long_threshold: only the AUTO variant uses it"},
  };
  for (const auto& c : cases) {
    pb::Workload w = SmallAuto(4096);
    c.mutate(w);
    const absl::Status s = ValidateWorkload(chip, w);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.message << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
  }
  // kv_per_cube is the short kernel's: kept when AUTO picks it.
  pb::Workload w = SmallAuto(1000);
  w.set_kv_per_cube(1);
  EXPECT_TRUE(ValidateWorkload(chip, w).ok());
}

// Llama3-70B decode on the full-scale chip (timing mode, profile zero): two context lengths
// each side of the default threshold; the kernel AUTO picks is the faster of the two, run
// explicitly, and AUTO's run is that kernel's.
// AUTO picks the faster of SHORT_CONTEXT and the long kernel two points each side of the
// measured threshold: decode (OPT3) at 2047..2050; prefill (RING) at 640, 704 | 705, 800.
void ExpectAutoPicksTheFaster(pb::Kernel kernel, pb::Variant long_variant, uint64_t threshold,
                              const std::vector<uint64_t>& points) {
  const pb::Chip chip = LoadChip("chip_4sip");
  const auto workload = [&](pb::Variant variant, uint64_t s) {
    pb::Workload w;
    w.set_kernel(kernel);
    w.set_variant(variant);
    w.set_s(s);
    return w;
  };
  const auto latency = [&](pb::Variant variant, uint64_t s) -> uint64_t {
    LaunchOptions options;
    options.keep_op_log = false;
    absl::StatusOr<LaunchResult> r = RunWorkload(chip, workload(variant, s), options);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return 0;
    EXPECT_TRUE(r->runtime_status.ok()) << r->runtime_status;
    return r->report.latency_ps();
  };
  for (uint64_t s : points) {
    const AutoChoice pick = DispatchAuto(workload(pb::AUTO, s), s);
    const bool picks_short = pick.variant == pb::SHORT_CONTEXT;
    EXPECT_EQ(pick.variant, picks_short ? pb::SHORT_CONTEXT : long_variant) << s;
    EXPECT_EQ(picks_short, s < threshold) << s << ": " << pick.why;
    const uint64_t auto_ps = latency(pb::AUTO, s);
    const uint64_t short_ps = latency(pb::SHORT_CONTEXT, s);
    const uint64_t long_ps = latency(long_variant, s);
    EXPECT_EQ(auto_ps, picks_short ? short_ps : long_ps) << s;
    EXPECT_LT(auto_ps, picks_short ? long_ps : short_ps)
        << "S " << s << ": short " << short_ps << " ps, long " << long_ps << " ps";
  }
}

TEST(RunWorkload, AutoPicksTheFasterKernelAroundTheThreshold) {
  ExpectAutoPicksTheFaster(pb::DECODE, pb::OPT3, kShortLongThreshold,
                           {kShortLongThreshold - 2, kShortLongThreshold - 1, kShortLongThreshold,
                            kShortLongThreshold + 1});
}

TEST(RunWorkload, PrefillAutoPicksTheFasterKernelAroundTheThreshold) {
  ExpectAutoPicksTheFaster(pb::PREFILL, pb::RING, kPrefillShortLongThreshold,
                           {640, kPrefillShortLongThreshold - 1, kPrefillShortLongThreshold,
                            800});
}

pb::Workload Decode(uint64_t s) {
  pb::Workload w;
  w.set_kernel(pb::DECODE);
  w.set_s(s);
  return w;
}

// A run must succeed: the bad-input checks let it through.
void ExpectRuns(const pb::Chip& chip, const pb::Workload& w) {
  LaunchOptions options;
  options.keep_op_log = false;
  absl::StatusOr<LaunchResult> r = RunWorkload(chip, w, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->runtime_status.ok()) << r->runtime_status;
}

void ExpectRefused(const pb::Chip& chip, const pb::Workload& w, const std::string& message) {
  const absl::Status s = ValidateWorkload(chip, w);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(message));
  EXPECT_THAT(std::string(s.message()), Not(HasSubstr("\n")));
}

// HBM: the KV caches of every request against a PE's region, before anything is placed; the
// boundary is the allocator's (one key more fails placement).
TEST(ValidateWorkload, KvCachesMustFitThePesHbm) {
  pb::Chip chip = LoadChip("small");
  chip.mutable_sip()->mutable_cube()->set_hbm_bytes(4 << 20);  // 1 MiB per PE
  // h_q 8, h_kv 1, d 64, C·P = 32, TILE 64: K 64 tiles x 8 KiB + V 4080 x 128 B + Q + O.
  pb::Workload w = Decode(130560);
  w.set_h_q(8);
  w.set_h_kv(1);
  w.set_d(64);
  w.set_c(8);
  w.set_p(4);
  w.set_tile(64);
  ExpectRuns(chip, w);
  w.set_s(130561);
  ExpectRefused(chip, w,
                "s: the KV caches of 1 request(s) need 1048832 B (1.00 MiB) of HBM on pe 4 "
                "(sip0.cube1.pe0) (1 KV head(s) per PE), its region holds 1048576 B (1.00 MiB)");
  w.set_max_context(200000);
  w.set_s(1000);
  ExpectRefused(chip, w, "max_context: the KV caches of 1 request(s) need");
  // Full scale: `ahbm run --kernel=decode --s=100000000000`.
  ExpectRefused(LoadChip("chip_4sip"), Decode(100'000'000'000),
                "s: the KV caches of 1 request(s) need 800000028672 B (745.06 GiB) of HBM on pe 9 "
                "(sip0.cube1.pe1) (1 KV head(s) per PE), its region holds 4294967296 B");
  pb::Workload base = Decode(100'000'000'000);
  base.set_variant(pb::BASELINE_FANOUT);
  ExpectRefused(LoadChip("chip_4sip"), base,
                "s: the baseline's K and V blocks (up to 12500000000 keys per PE, 1 request(s)) need");
}

// TCM: instances per PE (users x heads per PE) against the arenas; the boundary is the
// runtime's (one request more overflows an arena).
TEST(ValidateWorkload, InstancesMustFitThePesTcm) {
  const pb::Chip full = LoadChip("chip_4sip");
  pb::Workload w = Decode(2000);
  w.set_variant(pb::SHORT_CONTEXT);
  w.set_kv_per_cube(8);
  w.set_users(4);
  ExpectRuns(full, w);
  w.set_users(5);
  ExpectRefused(full, w,
                "users: 5 request(s) x 8 KV head(s) = 40 kernel instances on pe 1 (sip0.cube0.pe1) "
                "need 28160 B of TCM scratch each (a KV tile's or the reduce's temporaries); the "
                "1048576 B scratch arena gives each 26214 B; at most 4 request(s) fit");
  // The persistent arena (opt2's 8 Sj buffers of a 1024-key tile).
  pb::Workload p = Decode(262144);
  p.set_variant(pb::OPT2);
  p.set_h_q(8);
  p.set_h_kv(1);
  p.set_d(64);
  p.set_c(8);
  p.set_p(4);
  p.set_tile(1024);
  p.set_users(12);
  ExpectRefused(LoadChip("small"), p,
                "users: 12 request(s) x 1 KV head(s) = 12 kernel instances on pe 4 "
                "(sip0.cube1.pe0) need 12 x 265408 B of the TCM persistent arena (q, m, l, O, Sj "
                "buffers), which holds 3080192 B beside 65536 B of message staging; at most 11 request(s) fit");
  pb::Workload many = Decode(4096);
  many.set_users(24);
  ExpectRefused(full, many, "at most 19 request(s) fit");
  many.set_users(100000);
  ExpectRefused(full, many, "s, users: the KV caches of 100000 request(s) need 8601600000 B");
}

TEST(ValidateWorkload, DataModeHostMemoryIsBounded) {
  const pb::Chip full = LoadChip("chip_4sip");
  pb::Workload w = Decode(4'000'000);
  w.set_users(8);
  w.set_data(true);
  ExpectRefused(full, w,
                "data: data mode would hold ~397.42 GiB on the host (inputs, outputs, the HBM "
                "image of K, V, Q, O), above its bound of 4.00 GiB (kDataModeHostBytes)");
  w.set_data(false);
  EXPECT_TRUE(ValidateWorkload(full, w).ok());  // timing mode holds no values
  w.set_data(true);
  w.set_s(131072);
  w.set_users(1);
  EXPECT_TRUE(ValidateWorkload(full, w).ok());  // the README's case fits
}

TEST(ValidateWorkload, KvPerCubeIsAPowerOfTwoUpToEight) {
  const pb::Chip full = LoadChip("chip_4sip");
  for (uint32_t k : {3u, 5u, 16u}) {
    pb::Workload w = Decode(1000);
    w.set_variant(pb::SHORT_CONTEXT);
    w.set_kv_per_cube(k);
    ExpectRefused(full, w, absl::StrCat("kv_per_cube: must be 1, 2, 4 or 8 (got ", k, ")"));
  }
  for (uint32_t k : {1u, 2u, 4u, 8u}) {
    pb::Workload w = Decode(1000);
    w.set_variant(pb::SHORT_CONTEXT);
    w.set_kv_per_cube(k);
    EXPECT_TRUE(ValidateWorkload(full, w).ok()) << k;
  }
}

// A value given is a value used or refused: every explicit 0 the kernels cannot use is refused
// naming the field (before: d, t_q, users, tile, c, ... = 0 ran the defaults), and the
// rotation starts must lie in the group / CUBE.
TEST(ValidateWorkload, ExplicitZerosAndRotationsOutsideTheGroupAreRefused) {
  const pb::Chip small = LoadChip("small");
  pb::Workload decode = Decode(100);
  decode.set_h_q(8);
  decode.set_h_kv(2);
  decode.set_c(2);
  decode.set_p(4);
  pb::Workload prefill = decode;
  prefill.set_kernel(pb::PREFILL);
  prefill.set_c(4);  // the ring: C = G
  ExpectRuns(small, decode);
  ExpectRuns(small, prefill);
  for (const pb::Workload& base : {decode, prefill}) {
    for (const char* field : {"h_q", "h_kv", "d", "s", "t_q", "max_context", "c", "p",
                              "group_rows", "tile", "users"}) {
      pb::Workload w = base;
      ASSERT_TRUE(SetWorkloadField(w, field, "0").ok());
      ExpectRefused(small, w, absl::StrCat(field, ": must be > 0 (got 0)"));
    }
  }
  pb::Workload w = prefill;
  w.set_q_tile(0);
  ExpectRefused(small, w, "q_tile: must be > 0 (got 0)");
  w = decode;
  w.set_variant(pb::SHORT_CONTEXT);
  w.clear_c();
  w.set_kv_per_cube(0);
  ExpectRefused(small, w, "kv_per_cube: must be > 0 (got 0)");

  w = decode;
  w.set_start_cube(1000);
  ExpectRefused(small, w, "start_cube: 1000 is outside the CUBE Group of C = 2: 0 .. 1");
  w.set_start_cube(1);
  w.set_start_pe(9);
  ExpectRefused(small, w, "start_pe: 9 is outside the CUBE's P = 4 PEs: 0 .. 3");
  w.set_start_pe(3);
  ExpectRuns(small, w);
  w = prefill;
  w.set_start_cube(4);
  ExpectRefused(small, w, "start_cube: 4 is outside the CUBE Group of C = 4: 0 .. 3");
  w = decode;
  w.set_variant(pb::BASELINE_FANOUT);
  w.clear_c();
  w.set_start_cube(1);  // the baseline keeps a head in one CUBE
  ExpectRefused(small, w, "start_cube: 1 is outside the CUBE Group of C = 1: 0 .. 0");
  w.clear_start_cube();
  w.set_c(65536);  // ran as C = 1
  ExpectRefused(small, w, "c: BASELINE_FANOUT keeps a head in one CUBE (C = 1); got 65536");
  w.clear_c();
  w.set_users(4294967295u);  // refused at once (the check no longer walks every request)
  ExpectRefused(small, w, "s, users: the baseline's K and V blocks (up to 25 keys per PE, "
                          "4294967295 request(s)) need 53248.00 GiB of HBM");
}

// 2^32 - 1 requests are refused at once, not after a walk over each (the prefill query-tile
// default and the prefill baseline's outputs did; 80 s and ~100 GB of address space).
TEST(RunWorkload, HugeUserCountsAreRefusedAtOnce) {
  const pb::Chip small = LoadChip("small");
  pb::Workload w = Decode(100);
  w.set_kernel(pb::PREFILL);
  w.set_variant(pb::BASELINE_FANOUT);
  w.set_h_q(8);
  w.set_h_kv(1);
  w.set_d(64);
  w.set_p(4);
  w.set_users(4294967295u);
  const absl::StatusOr<LaunchResult> r = RunWorkload(small, w, LaunchOptions{});
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("users: a baseline_fanout instance needs 172416 B of the TCM persistent "
                        "arena"));
}

// Token counts past 2^40 are refused naming the field (max_context = 2^64 - 1 overflowed the
// KV block size into a CHECK failure, exit 134).
TEST(ValidateWorkload, TokenCountsAreBounded) {
  const pb::Chip small = LoadChip("small");
  for (pb::Kernel kernel : {pb::DECODE, pb::PREFILL}) {
    pb::Workload w = Decode(100);
    w.set_kernel(kernel);
    w.set_h_q(8);
    w.set_h_kv(2);
    w.set_p(4);
    w.set_c(kernel == pb::DECODE ? 2 : 4);
    w.set_max_context(18446744073709551615u);
    ExpectRefused(small, w,
                  "max_context: 18446744073709551615 tokens are past what the simulator places "
                  "(at most 2^40 = 1099511627776)");
    w.clear_max_context();
    w.set_s(kMaxTokens + 1);
    ExpectRefused(small, w, "s: 1099511627777 tokens are past what the simulator places");
    w.clear_s();
    w.add_request_lengths(100);
    w.add_request_lengths(kMaxTokens + 1);
    ExpectRefused(small, w, "request_lengths: 1099511627777 tokens are past");
  }
}

// AUTO's long kernel takes the largest C <= 8 the chip hosts for the KV heads (before: C = 8
// always, refused on the small chip: "h_kv: 2 KV heads need 2 CUBE Groups of C = 8").
TEST(RunWorkload, AutoPicksACTheChipHosts) {
  const pb::Chip small = LoadChip("small");  // 1 SIP of 2x4 CUBEs x 4 PEs
  pb::Workload w = Decode(3000);
  w.set_variant(pb::AUTO);
  w.set_h_q(2);
  w.set_h_kv(2);
  w.set_p(4);
  LaunchOptions options;
  options.keep_op_log = false;
  absl::StatusOr<LaunchResult> r = RunWorkload(small, w, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->runtime_status.ok()) << r->runtime_status;
  EXPECT_THAT(r->report.workload_summary(),
              HasSubstr("decode AUTO -> OPT3 (S 3000 >= threshold 2049; C 4, the largest C <= 8 "
                        "that hosts 2 KV heads): H_q 2, H_kv 2, d 128, S 3000, T_q 1, C 4, P 4"));
  // Its short kernel: the fewest heads per CUBE that host 16 KV heads on 8 CUBEs.
  w.set_s(300);
  w.set_h_q(16);
  w.set_h_kv(16);
  r = RunWorkload(small, w, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->report.workload_summary(),
              HasSubstr("AUTO -> SHORT_CONTEXT (S 300 < threshold 2049; kv_per_cube 2, the fewest "
                        "KV heads per CUBE that host the 16 KV heads (latency grows with heads per "
                        "CUBE))"));
  // The full chip keeps the ADR's C = 8 (and the summary as before).
  pb::Workload full = Decode(4096);
  full.set_variant(pb::AUTO);
  EXPECT_EQ(DecodeConfigOf(LoadChip("chip_4sip"), full)->c, 8u);
}

// AUTO's short kernel takes the fewest KV heads per CUBE the chip hosts, and that is the
// fastest kv_per_cube the chip hosts (ShortKvPerCubeWhy's rule, decode_run.h), decode and
// prefill, one request and a mixed batch, with 4 KV heads (kv_per_cube 1 hosts them on the
// small chip's 8 CUBEs) and 16 (kv_per_cube 2 is the fewest).
TEST(RunWorkload, AutoShortKvPerCubeIsTheFastest) {
  const pb::Chip small = LoadChip("small");  // 1 SIP of 2x4 CUBEs x 4 PEs
  LaunchOptions options;
  options.keep_op_log = false;
  for (pb::Kernel kernel : {pb::DECODE, pb::PREFILL}) {
    for (uint32_t h_kv : {4u, 16u}) {
      for (bool batch : {false, true}) {
        pb::Workload w;
        w.set_kernel(kernel);
        w.set_h_q(2 * h_kv);
        w.set_h_kv(h_kv);
        w.set_d(64);
        w.set_p(4);
        if (batch) {
          for (uint64_t len : {300, 120, 45}) w.add_request_lengths(len);
        } else {
          w.set_s(kernel == pb::DECODE ? 1000 : 300);
        }
        const std::string name = absl::StrCat(pb::Kernel_Name(kernel), " h_kv ", h_kv,
                                              batch ? " batch" : "");
        w.set_variant(pb::AUTO);
        absl::StatusOr<LaunchResult> picked = RunWorkload(small, w, options);
        ASSERT_TRUE(picked.ok()) << name << ": " << picked.status();
        const uint32_t expect = h_kv == 4 ? 1 : 2;
        EXPECT_THAT(picked->report.workload_summary(),
                    HasSubstr(absl::StrCat("kv_per_cube ", expect, ", the fewest KV heads per "
                                           "CUBE that host the ", h_kv, " KV heads")))
            << name;
        w.set_variant(pb::SHORT_CONTEXT);
        for (uint32_t k : {1u, 2u, 4u, 8u}) {
          w.set_kv_per_cube(k);
          absl::StatusOr<LaunchResult> r = RunWorkload(small, w, options);
          if (k < expect) {  // the chip does not host the heads with fewer per CUBE
            EXPECT_FALSE(r.ok()) << name << " kv_per_cube " << k;
            continue;
          }
          // More heads per CUBE may not fit a PE's TCM at all: no better either.
          if (!r.ok() && k > expect) continue;
          ASSERT_TRUE(r.ok()) << name << " kv_per_cube " << k << ": " << r.status();
          if (k == expect) {
            EXPECT_EQ(r->report.latency_ps(), picked->report.latency_ps()) << name;
          } else {
            EXPECT_GT(r->report.latency_ps(), picked->report.latency_ps())
                << name << " kv_per_cube " << k;
          }
        }
      }
    }
  }
}

// Unset geometry follows the chip (before: P = C = 8 everywhere, so the small chip refused
// "p: 8 PEs do not form a rectangle of the CUBE's 2x2 PE mesh"): P = the CUBE's PEs, decode
// C = the largest C <= 8 that hosts the KV heads, prefill ring C = G; the workload line shows
// the values used. The full chip keeps the ADR's C = P = 8.
TEST(RunWorkload, UnsetGeometryFollowsTheChip) {
  const pb::Chip small = LoadChip("small");  // 1 SIP of 2x4 CUBEs x 4 PEs
  LaunchOptions options;
  options.keep_op_log = false;
  const struct {
    pb::Kernel kernel;
    pb::Variant variant;
    uint32_t h_q, h_kv;
    std::string line;
  } cases[] = {
      // Llama's 8 KV heads fill the 8 CUBEs one each: C = 1.
      {pb::DECODE, pb::VARIANT_UNSPECIFIED, 64, 8,
       "decode OPT3: H_q 64, H_kv 8, d 128, S 512, T_q 1, C 1, P 4, TILE 256"},
      // Two KV heads: C = 4 (groups of 4 CUBEs; C = 8 hosts only one).
      {pb::DECODE, pb::OPT1, 16, 2, "decode OPT1: H_q 16, H_kv 2, d 128, S 512, T_q 1, C 4, P 4"},
      {pb::DECODE, pb::SHORT_CONTEXT, 64, 8, "decode SHORT_CONTEXT: H_q 64, H_kv 8, d 128, S 512, "
                                             "T_q 1, C 1, P 4"},
      {pb::DECODE, pb::BASELINE_FANOUT_GROUP, 16, 2,
       "decode BASELINE_FANOUT_GROUP: H_q 16, H_kv 2, d 128, S 512, T_q 1, C 4, P 4"},
      {pb::DECODE, pb::BASELINE_REV1_TREE, 64, 8,
       "decode BASELINE_REV1_TREE: H_q 64, H_kv 8, d 128, S 512, T_q 1, C 1, P 4"},
      // The ring's C is G: one KV head of G = 8 query heads fills the chip.
      {pb::PREFILL, pb::RING, 8, 1, "prefill RING: H_q 8, H_kv 1, d 128, S 512, T_q S, C 8, P 4"},
      {pb::PREFILL, pb::SHORT_CONTEXT, 64, 8,
       "prefill SHORT_CONTEXT: H_q 64, H_kv 8, d 128, S 512, T_q S, C 1, P 4"},
  };
  for (const auto& c : cases) {
    pb::Workload w;
    w.set_kernel(c.kernel);
    if (c.variant != pb::VARIANT_UNSPECIFIED) w.set_variant(c.variant);
    w.set_s(512);
    w.set_h_q(c.h_q);
    w.set_h_kv(c.h_kv);
    absl::StatusOr<LaunchResult> r = RunWorkload(small, w, options);
    ASSERT_TRUE(r.ok()) << c.line << ": " << r.status();
    EXPECT_TRUE(r->runtime_status.ok()) << r->runtime_status;
    EXPECT_THAT(r->report.workload_summary(), HasSubstr(c.line));
  }
  // The ring's C = G is its rule, not a default: too many KV heads name h_kv and what fits.
  pb::Workload ring;
  ring.set_kernel(pb::PREFILL);
  ring.set_variant(pb::RING);
  ring.set_s(512);
  ExpectRefused(small, ring,
                "h_kv: the ring puts each KV head on C = G = 8 CUBEs (one query head each); 8 KV "
                "heads need 64 CUBEs and the chip has 1 such group(s) from SIP 0; at most h_kv = 1 "
                "fits (h_q = 8)");
  // The full chip: C = P = 8 as before (goldens unchanged); chip_2sip hosts 8 KV heads at C = 4.
  absl::StatusOr<kernels::DecodeConfig> full = DecodeConfigOf(LoadChip("chip_4sip"), Decode(4096));
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->c, 8u);
  EXPECT_EQ(full->p, 8u);
  absl::StatusOr<kernels::DecodeConfig> two = DecodeConfigOf(LoadChip("chip_2sip"), Decode(4096));
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->c, 4u);
  EXPECT_EQ(two->p, 8u);
}

// Too many KV heads for the chip's groups: the refusal says what C (or kv_per_cube) fits.
TEST(ValidateWorkload, KvHeadsThatDoNotFitNameWhatWould) {
  pb::Workload c8 = Decode(131072);
  c8.set_c(8);
  ExpectRefused(LoadChip("chip_2sip"), c8,
                "h_kv: 8 KV heads need 8 CUBE Groups of C = 8; SIPs 0.. have 4; C = 4 fits "
                "(--c=4)");
  pb::Workload w = Decode(1000);
  w.set_variant(pb::SHORT_CONTEXT);
  w.set_h_q(16);
  w.set_h_kv(16);
  w.set_p(4);
  ExpectRefused(LoadChip("small"), w,
                "h_kv: 16 KV heads need 16 CUBE Groups of C = 1; SIPs 0.. have 8; kv_per_cube = "
                "2 fits (--kv_per_cube=2)");
}

// A TCM refusal names the field that made one instance too big (before: every one began
// "users: 1 request(s) x 1 KV head(s)"), and the largest value of it that fits runs.
TEST(ValidateWorkload, TcmRefusalsNameTheShapeFieldThatDoesNotFit) {
  const pb::Chip small = LoadChip("small");
  pb::Workload base = Decode(1000);
  base.set_h_q(8);
  base.set_h_kv(1);
  base.set_c(4);
  base.set_p(4);
  const struct {
    const char* field;
    uint32_t too_big, fits;
    std::string message;
  } cases[] = {
      {"d", 4096, 3846,
       "d: 4096 elements per head: one kernel instance on pe 4 (sip0.cube1.pe0) needs 1116160 B "
       "of the TCM scratch arena (a KV tile's or the reduce's temporaries), which gives one "
       "instance 1048513 B; at most d = 3846 fits"},
      {"tile", 100000, 21752,
       "tile: 100000 keys: one kernel instance on pe 4 (sip0.cube1.pe0) needs 6406336 B of the "
       "TCM persistent arena (q, m, l, O, Sj buffers), which holds 3145728 B; at most tile = "
       "21752 fits"},
      {"t_q", 64, 29, "t_q: 64 query tokens: one kernel instance on pe 4 (sip0.cube1.pe0) needs"},
  };
  for (const auto& c : cases) {
    pb::Workload w = base;
    ASSERT_TRUE(SetWorkloadField(w, c.field, absl::StrCat(c.too_big)).ok());
    ExpectRefused(small, w, c.message);
    ASSERT_TRUE(SetWorkloadField(w, c.field, absl::StrCat(c.fits + 1)).ok());
    ExpectRefused(small, w, absl::StrCat("at most ", c.field, " = ", c.fits, " fits"));
    ASSERT_TRUE(SetWorkloadField(w, c.field, absl::StrCat(c.fits)).ok());
    ExpectRuns(small, w);
  }
}

// Prefill's lookahead, ring_depth and ring_message_bytes, and BASELINE_DOT: a value given is a
// value used (runs) or refused with one line naming the field.
TEST(ValidateWorkload, PrefillPipelineAndRingKnobsAreUsedOrRefused) {
  const pb::Chip small = LoadChip("small");
  pb::Workload ring = Decode(100);
  ring.set_kernel(pb::PREFILL);
  ring.set_h_q(4);
  ring.set_h_kv(1);
  ring.set_d(32);
  ring.set_p(4);
  pb::Workload w = ring;
  w.set_lookahead(3);
  w.set_ring_depth(1);
  w.set_ring_message_bytes(256);
  ExpectRuns(small, w);
  w.set_variant(pb::BASELINE_DOT);
  w.clear_lookahead();
  ExpectRuns(small, w);
  w.set_lookahead(0);
  ExpectRefused(small, w, "lookahead: BASELINE_DOT issues blocking dots; nothing to issue ahead");
  w = ring;
  w.set_lookahead(4);
  ExpectRefused(small, w, "lookahead: 4 Q·Kᵀ composites ahead and a P·V need 5 in flight; the PE "
                          "scheduler admits 4 (max_inflight_composites): at most 3");
  w = ring;
  w.set_ring_depth(5);
  ExpectRefused(small, w, "ring_depth: receive buffers posted ahead must be 1 .. 4 (got 5)");
  w.set_ring_depth(0);
  ExpectRefused(small, w, "ring_depth: must be > 0 (got 0)");
  w = ring;
  w.set_ring_message_bytes(262145);
  ExpectRefused(small, w, "ring_message_bytes: 262145 B messages exceed the NOC endpoint queue "
                          "(262144 B, noc.endpoint_queue_bytes)");
  for (pb::Variant v : {pb::FLASH, pb::SHORT_CONTEXT, pb::BASELINE_FANOUT}) {
    w = ring;
    w.set_variant(v);
    if (v == pb::FLASH) w.clear_p();
    w.set_ring_depth(2);
    ExpectRefused(small, w, absl::StrCat("ring_depth: ", pb::Variant_Name(v), " has no ring"));
  }
  w = ring;
  w.set_variant(pb::AUTO);  // S 100: SHORT_CONTEXT
  w.set_ring_message_bytes(4096);
  ExpectRefused(small, w, "ring_message_bytes: AUTO picks SHORT_CONTEXT");
  w.clear_ring_message_bytes();
  w.set_lookahead(0);  // both of AUTO's kernels pipeline
  ExpectRuns(small, w);
}

}  // namespace
}  // namespace ahbm::launch

namespace ahbm::launch {
namespace {

pb::Workload SmallKv(pb::Kernel kernel, pb::Variant variant) {
  pb::Workload w;
  w.set_kernel(kernel);
  w.set_variant(variant);
  w.set_h_q(8);
  w.set_h_kv(2);
  w.set_d(32);
  w.set_s(150);
  w.set_p(4);
  w.set_tile(32);
  return w;
}

// k_layout: the global k.npy stays [H_kv, S, d] whatever the layout; placement writes it. Each
// layout of decode (opt3, from .npy files) and prefill (ring) gives the same o.npy; the
// workload line names the layout.
TEST(RunWorkload, KLayoutsReadTheSameNpyInputsAndGiveTheSameOutputs) {
  const pb::Chip chip = LoadChip("small");
  for (pb::Kernel kernel : {pb::DECODE, pb::PREFILL}) {
    pb::Workload w = SmallKv(kernel, kernel == pb::DECODE ? pb::OPT3 : pb::RING);
    if (kernel == pb::DECODE) w.set_c(2);
    w.set_h_q(kernel == pb::DECODE ? 8 : 4);  // the ring: C = G = 2 CUBEs of a group
    w.set_data(true);
    const std::string in = TmpDir(absl::StrCat("k_layout_in_", kernel));
    const uint64_t tq = kernel == pb::DECODE ? 1 : 150;
    WriteNpyOrDie(in + "/q.npy", {w.h_q(), tq, 32}, Random(w.h_q() * tq * 32, 1));
    WriteNpyOrDie(in + "/k.npy", {2, 150, 32}, Random(2 * 150 * 32, 2));
    WriteNpyOrDie(in + "/v.npy", {2, 150, 32}, Random(2 * 150 * 32, 3));
    std::vector<float> first;
    for (pb::KLayout layout : {pb::TILE_MAJOR, pb::TRANSPOSED, pb::ROW_MAJOR}) {
      w.set_k_layout(layout);
      const std::string out = TmpDir(absl::StrCat("k_layout_out_", kernel, "_", layout));
      LaunchOptions options;
      options.inputs_dir = in;
      options.outputs_dir = out;
      absl::StatusOr<LaunchResult> r = RunWorkload(chip, w, options);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_TRUE(r->runtime_status.ok()) << r->runtime_status;
      absl::StatusOr<host::NpyArray> o = host::ReadNpy(out + "/o.npy");
      ASSERT_TRUE(o.ok()) << o.status();
      if (first.empty()) first = o->data;
      EXPECT_EQ(o->data, first) << pb::KLayout_Name(layout);
      if (layout == pb::TILE_MAJOR) {
        EXPECT_THAT(r->report.workload_summary(), Not(HasSubstr(", K ")));
      } else {
        EXPECT_THAT(r->report.workload_summary(),
                    HasSubstr(absl::StrCat(", K ", pb::KLayout_Name(layout))));
      }
    }
  }
}

// The ADR kernels take every layout; the baselines read K as their own [d, B] block and refuse
// any k_layout in one line; a row-major K's transposed tiles count in the TCM check.
TEST(ValidateWorkload, KLayoutIsUsedByTheAdrKernelsAndRefusedByTheBaselines) {
  const pb::Chip small = LoadChip("small");
  for (pb::KLayout layout : {pb::TILE_MAJOR, pb::TRANSPOSED, pb::ROW_MAJOR}) {
    for (pb::Variant v : {pb::OPT1, pb::OPT2, pb::OPT3, pb::SHORT_CONTEXT, pb::AUTO}) {
      pb::Workload w = SmallKv(pb::DECODE, v);
      if (v != pb::SHORT_CONTEXT && v != pb::AUTO) w.set_c(2);
      w.set_k_layout(layout);
      EXPECT_TRUE(ValidateWorkload(small, w).ok()) << pb::Variant_Name(v) << " "
                                                   << ValidateWorkload(small, w);
    }
    for (pb::Variant v : {pb::FLASH, pb::RING, pb::SHORT_CONTEXT, pb::AUTO}) {
      pb::Workload w = SmallKv(pb::PREFILL, v);
      if (v == pb::FLASH) w.clear_p();
      if (v == pb::RING || v == pb::AUTO) w.set_h_q(4);  // C = G = 2
      w.set_k_layout(layout);
      EXPECT_TRUE(ValidateWorkload(small, w).ok()) << pb::Variant_Name(v) << " "
                                                   << ValidateWorkload(small, w);
    }
  }
  for (pb::Variant v : {pb::BASELINE_FANOUT, pb::BASELINE_FANOUT_GROUP, pb::BASELINE_REV1_TREE}) {
    pb::Workload w = SmallKv(pb::DECODE, v);
    w.clear_tile();
    w.set_k_layout(pb::TRANSPOSED);
    ExpectRefused(small, w, absl::StrCat("k_layout: ", pb::Variant_Name(v),
                                         " reads each rank's K as one [d, B] block of its own"));
  }
  pb::Workload fanout = SmallKv(pb::PREFILL, pb::BASELINE_FANOUT);
  fanout.set_k_layout(pb::TILE_MAJOR);
  ExpectRefused(small, fanout, "k_layout: BASELINE_FANOUT reads each rank's K as one [d, B]");
  // Full chip, opt2, S = 2^20 (B = 16384 keys a rank), one tile of 16384 keys: tile-major
  // holds its 512 KiB Sj buffer; row-major also needs the 4 MiB transposed tile beside it (and
  // the 4 MiB loaded tile in scratch): refused, naming tile.
  const pb::Chip full = LoadChip("chip_4sip");
  pb::Workload w;
  w.set_kernel(pb::DECODE);
  w.set_variant(pb::OPT2);
  w.set_s(1 << 20);
  w.set_tile(16384);
  EXPECT_TRUE(ValidateWorkload(full, w).ok()) << ValidateWorkload(full, w);
  w.set_k_layout(pb::ROW_MAJOR);
  ExpectRefused(full, w, "tile: 16384 keys: one kernel instance on");
}

}  // namespace
}  // namespace ahbm::launch

namespace ahbm::launch {
namespace {

// A row-major K's TCM (its loaded and transposed tiles) is counted: the most requests the
// check lets through run without a TCM overflow, for every variant (the persistent arena binds
// opt2 and opt3 with their transposed-tile buffers, the scratch arena opt1).
TEST(ValidateWorkload, RowMajorKAtTheTcmBoundaryRuns) {
  const pb::Chip small = LoadChip("small");
  for (pb::Variant v : {pb::OPT1, pb::OPT3, pb::OPT2}) {
    pb::Workload w = SmallKv(pb::DECODE, v);
    w.set_h_kv(1);
    w.set_c(8);
    w.set_d(128);
    w.set_tile(1024);
    w.set_s(65536);
    w.set_k_layout(pb::ROW_MAJOR);
    w.set_users(1000);
    const absl::Status refused = ValidateWorkload(small, w);
    const std::string message(refused.message());
    const size_t at = message.find("at most ");
    ASSERT_NE(at, std::string::npos) << message;
    const int fit = std::atoi(message.c_str() + at + 8);
    ASSERT_GT(fit, 0) << message;
    w.set_users(fit);
    SCOPED_TRACE(absl::StrCat(pb::Variant_Name(v), ": ", fit, " request(s)"));
    ExpectRuns(small, w);
  }
}

}  // namespace
}  // namespace ahbm::launch
