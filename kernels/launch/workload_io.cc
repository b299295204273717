#include "kernels/launch/workload_io.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/check.h"
#include "base/status_macros.h"
#include "base/text_proto.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"

namespace ahbm::launch {
namespace {

using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;

// The enum's value names without its UNSPECIFIED (0) value.
std::string SetEnumNames(const EnumDescriptor& e) {
  std::vector<std::string> names;
  for (int i = 0; i < e.value_count(); ++i) {
    if (e.value(i)->number() != 0) names.push_back(e.value(i)->name());
  }
  return absl::StrJoin(names, ", ");
}

}  // namespace

absl::StatusOr<pb::Workload> ParseWorkloadText(std::string_view text,
                                               std::string_view source_name) {
  const std::string source(source_name);
  if (text.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": too large for a workload (", text.size(), " bytes)"));
  }
  pb::Workload workload;
  RETURN_IF_ERROR(ParseTextProto(text, source, &workload));
  return workload;
}

absl::StatusOr<pb::Workload> LoadWorkloadFile(const std::string& path) {
  absl::StatusOr<std::string> contents = ReadTextFile(path, "workload file");
  RETURN_IF_ERROR(contents.status());
  return ParseWorkloadText(*contents, path);
}

absl::Status SetWorkloadField(pb::Workload& workload, const std::string& name,
                              const std::string& value) {
  const FieldDescriptor* field = pb::Workload::descriptor()->FindFieldByName(name);
  if (field == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": no such workload field"));
  }
  const google::protobuf::Reflection* reflection = workload.GetReflection();
  const auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", what, " (got '", value, "')"));
  };
  if (field->is_repeated()) {
    // A comma-separated list replaces the field's values (only repeated uint64 exists).
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_UINT64) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": unsupported field type"));
    }
    reflection->ClearField(&workload, field);
    for (absl::string_view item : absl::StrSplit(value, ',')) {
      uint64_t v = 0;
      if (!absl::SimpleAtoi(item, &v)) {
        return bad("must be a comma-separated list of integers in [0, 18446744073709551615]");
      }
      reflection->AddUInt64(&workload, field, v);
    }
    return absl::OkStatus();
  }
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_UINT32: {
      uint32_t v = 0;
      if (!absl::SimpleAtoi(value, &v)) return bad("must be an integer in [0, 4294967295]");
      reflection->SetUInt32(&workload, field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t v = 0;
      if (!absl::SimpleAtoi(value, &v)) {
        return bad("must be an integer in [0, 18446744073709551615]");
      }
      reflection->SetUInt64(&workload, field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_BOOL:
      if (value != "true" && value != "false") return bad("must be true or false");
      reflection->SetBool(&workload, field, value == "true");
      return absl::OkStatus();
    case FieldDescriptor::CPPTYPE_STRING:
      reflection->SetString(&workload, field, value);
      return absl::OkStatus();
    case FieldDescriptor::CPPTYPE_ENUM: {
      const EnumDescriptor* e = field->enum_type();
      const std::string upper = absl::AsciiStrToUpper(value);
      for (int i = 0; i < e->value_count(); ++i) {
        // UNSPECIFIED is "unset": leave the flag out instead.
        if (e->value(i)->number() != 0 && e->value(i)->name() == upper) {
          reflection->SetEnum(&workload, field, e->value(i));
          return absl::OkStatus();
        }
      }
      return bad(absl::StrCat("unknown value; one of ", SetEnumNames(*e), " (any case)"));
    }
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(name, ": unsupported field type"));
}

namespace {

// Every workload field: what it means (with its unit), its default when left unset (empty:
// the kernel needs it) and whether an explicit 0 is a value. Enum fields list their values
// after the meaning. `ahbm help run` and `ahbm help compare` print it; CheckGivenValues reads
// the defaults and zero_ok.
struct FieldDoc {
  const char* name;
  const char* meaning;
  const char* default_text;
  bool zero_ok = false;
};

constexpr FieldDoc kFieldDocs[] = {
    {"kernel", "what to run", ""},
    {"variant",
     "the kernel's variant. DECODE: OPT1, OPT2, OPT3, OPT2_LOOKAHEAD, SHORT_CONTEXT, AUTO, "
     "BASELINE_FANOUT, BASELINE_FANOUT_GROUP, BASELINE_REV1_TREE, BASELINE_DOT; PREFILL: FLASH, RING, SHORT_CONTEXT, AUTO, "
     "BASELINE_FANOUT",
     "decode OPT3, prefill RING"},
    {"h_q", "query heads", "64, Llama3-70B"},
    {"h_kv", "KV heads; h_q must be a multiple of it (G = h_q / h_kv)", "8"},
    {"d", "head dimension, elements", "128"},
    {"s",
     "context length in tokens, the new one included (decode), or prompt length (prefill); "
     "not with request_lengths; compare's default: decode 131072, prefill 8192",
     ""},
    {"t_q", "query tokens this launch, the last T_q positions, causal",
     "decode 1, prefill the whole prompt"},
    {"max_context", "tokens the KV blocks are sized for (>= s): B = ceil(max_context / (C*P))",
     "s"},
    {"c", "CUBEs per CUBE Group (sequence parallelism over CUBEs)",
     "decode the largest C <= 8 that hosts the KV heads on the chip (8 on the full chip), "
     "prefill ring G"},
    {"p", "PEs per CUBE (sequence parallelism over PEs)", "the CUBE's PEs"},
    {"group_rows", "CUBE Group rectangle rows, with group_cols (rows x cols = c)",
     "the rectangle of c CUBEs with the shallowest reduce root"},
    {"group_cols", "CUBE Group rectangle columns, with group_rows", "as group_rows"},
    {"tile", "KV tile, keys", "decode 256, prefill 128"},
    {"q_tile", "prefill query tile, GEMM rows (a multiple of G = h_q / h_kv)",
     "up to 128, balanced over the PEs"},
    {"kv_per_cube", "SHORT_CONTEXT: whole KV heads per CUBE, 1, 2, 4 or 8", "1"},
    {"users", "concurrent requests, each with its own KV cache", "1, or request_lengths' count"},
    {"start_cube", "Level-1 rotation of request 0: its first CUBE in the group, 0 .. C-1", "0",
     true},
    {"start_pe", "Level-2 rotation of request 0: its first PE in the CUBE, 0 .. P-1", "0", true},
    {"level1_reduce",
     "decode Level-1 (NOC, between CUBEs) reduce collective; RING_REDUCE is the chunked ring "
     "(reduce-scatter of C - 1 steps, then a gather to the root)",
     "TREE, rooted at the centre"},
    {"level2_reduce",
     "decode Level-2 (IPCQ, between a CUBE's PEs) reduce collective; RING_REDUCE is the "
     "chunked ring (reduce-scatter of P - 1 steps, then a gather; its cycle must close in one "
     "IPCQ hop)",
     "TREE"},
    {"k_layout",
     "decode, prefill (not the baselines): K cache layout in HBM: TILE_MAJOR [tiles][d][TILE], "
     "TRANSPOSED [d, B] (strided tile reads), ROW_MAJOR [B, d] (each tile transposed on MATH)",
     "TILE_MAJOR"},
    {"query_split", "prefill: how a head's query tiles spread over a CUBE's PEs", "ZIGZAG"},
    {"issue_cost_profile", "PE CPU issue cost per command (ADR-0064): zero or realistic",
     "the topology's"},
    {"sip", "first SIP used; KV head h runs on SIP sip + h / (CUBE Groups per SIP)", "0", true},
    {"data", "data mode: real values through the kernels (else timing mode, no values)", "false",
     true},
    {"seed", "draws the inputs in data mode when no inputs_dir is given", "0", true},
    {"gemm_m", "SELFTEST_GEMM: rows of A and out", ""},
    {"gemm_k", "SELFTEST_GEMM: columns of A, rows of B", ""},
    {"gemm_n", "SELFTEST_GEMM: columns of B and out", ""},
    {"vector_len", "SELFTEST_ALLREDUCE: fp32 elements of each PE's vector", ""},
    {"cube", "SELFTEST_*: the global CUBE index the self-test runs on", "0", true},
    {"no_rotation", "keep every request at start_cube / start_pe (else request r is rotated by r)",
     "false", true},
    {"request_lengths",
     "one context (decode) or prompt (prefill) length per request, tokens, comma-separated: a "
     "batch; s unset",
     "every request has length s"},
    {"reduce_payload", "decode reduce message: the (m, l, O) triplet as three messages or one",
     "TRIPLET"},
    {"reduce_merge", "decode reduce merge: 11 MATH ops on the CPU or one scheduler command",
     "PRIMITIVE"},
    {"short_long_threshold",
     "AUTO: contexts shorter than this (tokens) run SHORT_CONTEXT, longer the long kernel; 0: "
     "always the long kernel",
     "measured: decode 2049, prefill 705", true},
    {"kv_bank_layout", "BANK HBM channels: where a rank's V sits against its K", "NAIVE"},
    {"one_shot", "decode: one Q*K^T, one softmax, one P*V over a rank's whole KV block (ADR 5.2)",
     "false", true},
    {"lookahead", "composites a kernel keeps issued ahead of the one it waits on (ADR 9.1)",
     "1", true},
    {"max_inflight_composites", "PE scheduler composites in flight (overrides the topology)",
     "the topology's"},
    {"ring_depth",
     "prefill ring: TCM sub-block slots, receives posted up to depth - 1 steps ahead (1: the "
     "held sub-block streams from HBM), 1 .. 4 (ADR 9.4)",
     "2"},
    {"ring_message_bytes", "prefill ring: NOC message chunk, bytes, at most noc.endpoint_queue_bytes",
     "16384"},
};

const FieldDoc& DocOf(const FieldDescriptor& field) {
  for (const FieldDoc& doc : kFieldDocs) {
    if (field.name() == doc.name) return doc;
  }
  AHBM_CHECK(false) << "workload field " << field.name() << " has no entry in kFieldDocs";
  return kFieldDocs[0];
}

}  // namespace

std::vector<WorkloadField> WorkloadFields() {
  std::vector<WorkloadField> out;
  const google::protobuf::Descriptor* d = pb::Workload::descriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const FieldDoc& doc = DocOf(*f);
    std::string help = doc.meaning;
    // The variant's meaning names its values per kernel.
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_ENUM && f->name() != "variant") {
      absl::StrAppend(&help, ": ", SetEnumNames(*f->enum_type()));
    }
    absl::StrAppend(&help, *doc.default_text == '\0' ? " (required)"
                                                     : absl::StrCat(" (default: ", doc.default_text, ")"));
    out.push_back({f->name(), std::move(help)});
  }
  return out;
}

absl::Status CheckGivenValues(const pb::Workload& workload) {
  std::vector<const FieldDescriptor*> set;
  workload.GetReflection()->ListFields(workload, &set);
  const google::protobuf::Reflection* r = workload.GetReflection();
  for (const FieldDescriptor* field : set) {
    if (field->is_repeated()) continue;  // request_lengths: RequestBatchOf checks each length
    const FieldDoc& doc = DocOf(*field);
    if (doc.zero_ok) continue;
    const std::string leave =
        *doc.default_text == '\0'
            ? std::string()
            : absl::StrCat("; leave it unset for the default (", doc.default_text, ")");
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_UINT32:
      case FieldDescriptor::CPPTYPE_UINT64: {
        const uint64_t v = field->cpp_type() == FieldDescriptor::CPPTYPE_UINT32
                               ? r->GetUInt32(workload, field)
                               : r->GetUInt64(workload, field);
        if (v == 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(field->name(), ": must be > 0 (got 0)", leave));
        }
        break;
      }
      case FieldDescriptor::CPPTYPE_ENUM:
        if (r->GetEnumValue(workload, field) == 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              field->name(), ": ", field->enum_type()->value(0)->name(), " is the unset value; give one of ",
              SetEnumNames(*field->enum_type()), leave));
        }
        break;
      case FieldDescriptor::CPPTYPE_STRING:
        if (r->GetString(workload, field).empty()) {
          return absl::InvalidArgumentError(absl::StrCat(field->name(), ": empty", leave));
        }
        break;
      default:
        break;
    }
  }
  return absl::OkStatus();
}

absl::Status CheckUnusedWorkloadFields(const pb::Workload& workload, const std::string& kernel,
                                       const std::vector<std::string>& used) {
  static const char* const kCommon[] = {"kernel", "data", "seed", "issue_cost_profile"};
  std::vector<const FieldDescriptor*> set;
  workload.GetReflection()->ListFields(workload, &set);
  for (const FieldDescriptor* field : set) {
    bool ok = std::find(used.begin(), used.end(), field->name()) != used.end();
    for (const char* common : kCommon) ok = ok || field->name() == common;
    if (ok) continue;
    // A repeated field (request_lengths) prints as its values, comma-separated.
    std::string value;
    const int count =
        field->is_repeated() ? workload.GetReflection()->FieldSize(workload, field) : 1;
    for (int i = 0; i < count; ++i) {
      std::string one;
      google::protobuf::TextFormat::PrintFieldValueToString(workload, field,
                                                            field->is_repeated() ? i : -1, &one);
      absl::StrAppend(&value, i > 0 ? "," : "", one);
    }
    return absl::InvalidArgumentError(absl::StrCat(field->name(), ": not used by ", kernel,
                                                   " (got ", value, "); leave it unset"));
  }
  return absl::OkStatus();
}

}  // namespace ahbm::launch
