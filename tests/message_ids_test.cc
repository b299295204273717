// Message ids are labels (actors/README.md, "Declared shortcuts"): the kernel runtime draws them
// from one chip-wide counter in handler order, a number no single PE could know. With
// LaunchOptions::per_pe_message_ids each sending PE draws its own, ((pe + 1) << 32) | its count
// — what the PE alone could do — and the run must be the same up to renaming: op logs equal
// once each id is replaced by its order of first appearance, reports (events included) and
// launch facts equal. Every golden case but the full-chip ones (the first full-chip decode
// instead) and random workloads.
#include <cctype>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/report.pb.h"
#include "proto/topology.pb.h"
#include "proto/trace.pb.h"
#include "proto/workload.pb.h"
#include "tests/golden_cases.h"
#include "tests/random_diff.h"
#include "tests/random_workload.h"
#include "topology/loader.h"

namespace ahbm::golden {
namespace {

using google::protobuf::util::MessageDifferencer;

constexpr uint64_t kRandomSeeds = 150;

// Replaces every `message_id` field in `m` (any depth), and the id in an op label's
// "msg <id>", by 1 + the order of the id's first appearance in `order`; counts the
// message_id fields replaced.
void Rename(google::protobuf::Message& m, std::map<uint64_t, uint64_t>& order, uint64_t* named) {
  const google::protobuf::Reflection* r = m.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const google::protobuf::FieldDescriptor* f : fields) {
    if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(m, f); ++i) {
          Rename(*r->MutableRepeatedMessage(&m, f, i), order, named);
        }
      } else {
        Rename(*r->MutableMessage(&m, f), order, named);
      }
    } else if (f->name() == "label" && !f->is_repeated() &&
               f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_STRING) {
      // Op labels name a message as "msg <id>".
      std::string label = r->GetString(m, f);
      const size_t at = label.find("msg ");
      if (at == std::string::npos) continue;
      size_t end = at + 4;
      while (end < label.size() && std::isdigit(static_cast<unsigned char>(label[end]))) ++end;
      if (end == at + 4) continue;
      const uint64_t id = std::stoull(label.substr(at + 4, end - at - 4));
      auto [it, inserted] = order.try_emplace(id, order.size() + 1);
      label.replace(at + 4, end - at - 4, std::to_string(it->second));
      r->SetString(&m, f, label);
    } else if (f->name() == "message_id" && !f->is_repeated() &&
               f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_UINT64) {
      ++*named;
      auto [it, inserted] = order.try_emplace(r->GetUInt64(m, f), order.size() + 1);
      r->SetUInt64(&m, f, it->second);
    }
  }
}

// The op log with every message id renamed (Rename, one order for the whole log).
std::vector<pb::TraceRecord> Renamed(std::vector<pb::TraceRecord> records, uint64_t* named) {
  std::map<uint64_t, uint64_t> order;
  for (pb::TraceRecord& r : records) Rename(r, order, named);
  return records;
}

// Returns the number of op records that name a message.
uint64_t ExpectSameUpToIds(const std::string& name, const Outcome& counter,
                           const Outcome& per_pe) {
  EXPECT_EQ(counter.extra, per_pe.extra) << name;
  uint64_t named = 0, named_per_pe = 0;
  const std::vector<pb::TraceRecord> a = Renamed(counter.records, &named);
  const std::vector<pb::TraceRecord> b = Renamed(per_pe.records, &named_per_pe);
  EXPECT_EQ(named, named_per_pe) << name;
  EXPECT_EQ(a.size(), b.size()) << name;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (!MessageDifferencer::Equals(a[i], b[i])) {
      ADD_FAILURE() << name << ": op log record " << i << " differs (ids renamed):\n  counter: "
                    << a[i].ShortDebugString() << "\n  per PE:  " << b[i].ShortDebugString();
      break;
    }
  }
  std::string diff;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differencer.Compare(counter.report, per_pe.report))
      << name << ": reports differ:\n" << diff;
  // The per-PE ids were really used (else the comparison shows nothing).
  for (const pb::TraceRecord& r : per_pe.records) {
    if (r.has_op() && r.op().message_id() != 0) {
      EXPECT_GE(r.op().message_id(), uint64_t{1} << 32) << name;
      break;
    }
  }
  return named;
}

class MessageIdsGoldenTest : public ::testing::TestWithParam<Case> {};

TEST_P(MessageIdsGoldenTest, SameRunUpToRenaming) {
  const Case& c = GetParam();
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(c.topology);
  ASSERT_TRUE(chip.ok()) << chip.status();
  RunKnobs per_pe;
  per_pe.per_pe_message_ids = true;
  absl::StatusOr<Outcome> a = c.run(*chip, RunKnobs());
  absl::StatusOr<Outcome> b = c.run(*chip, per_pe);
  ASSERT_TRUE(a.ok()) << c.name << ": " << a.status();
  ASSERT_TRUE(b.ok()) << c.name << ": " << b.status();
  ExpectSameUpToIds(c.name, *a, *b);
}

INSTANTIATE_TEST_SUITE_P(Cases, MessageIdsGoldenTest, ::testing::ValuesIn(KnobCases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

TEST(MessageIdsRandomTest, SameRunUpToRenaming) {
  const testing::TestChips chips = testing::LoadTestChips();
  uint64_t ran = 0, named = 0;
  for (uint64_t seed = 0; seed < kRandomSeeds; ++seed) {
    const testing::RandomCase rc = testing::RandomWorkload(seed);
    const pb::Chip& chip = rc.bank_hbm ? chips.bank : chips.fifo;
    const std::string name =
        absl::StrCat("seed ", seed, " (ahbm run ", testing::RunFlags(rc.workload), ")");
    RunKnobs per_pe;
    per_pe.per_pe_message_ids = true;
    absl::StatusOr<Outcome> a = LaunchOutcome(chip, rc.workload, RunKnobs());
    absl::StatusOr<Outcome> b = LaunchOutcome(chip, rc.workload, per_pe);
    ASSERT_EQ(a.ok(), b.ok()) << name;
    if (!a.ok()) {
      EXPECT_EQ(a.status(), b.status()) << name;
      continue;
    }
    ++ran;
    named += ExpectSameUpToIds(name, *a, *b);
  }
  EXPECT_GT(ran, kRandomSeeds / 2);
  EXPECT_GT(named, 100u);  // the workloads send messages
}

}  // namespace
}  // namespace ahbm::golden
