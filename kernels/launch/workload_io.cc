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
#include "base/text_proto.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"

namespace ahbm::launch {
namespace {

using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;

std::string EnumNames(const EnumDescriptor& e) {
  std::vector<std::string> names;
  for (int i = 0; i < e.value_count(); ++i) names.push_back(e.value(i)->name());
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
  if (absl::Status status = ParseTextProto(text, source, &workload); !status.ok()) return status;
  return workload;
}

absl::StatusOr<pb::Workload> LoadWorkloadFile(const std::string& path) {
  absl::StatusOr<std::string> contents = ReadTextFile(path, "workload file");
  if (!contents.ok()) return contents.status();
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
        if (e->value(i)->name() == upper) {
          reflection->SetEnum(&workload, field, e->value(i));
          return absl::OkStatus();
        }
      }
      return bad(absl::StrCat("unknown value; one of ", EnumNames(*e), " (any case)"));
    }
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(name, ": unsupported field type"));
}

std::vector<WorkloadField> WorkloadFields() {
  std::vector<WorkloadField> out;
  const google::protobuf::Descriptor* d = pb::Workload::descriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    std::string help =
        f->cpp_type() == FieldDescriptor::CPPTYPE_ENUM
            ? absl::StrCat("workload field: ", EnumNames(*f->enum_type()))
            : absl::StrCat("workload field (", f->type_name(), ")");
    out.push_back({f->name(), std::move(help)});
  }
  return out;
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
    std::string value;
    google::protobuf::TextFormat::PrintFieldValueToString(workload, field, -1, &value);
    return absl::InvalidArgumentError(absl::StrCat(field->name(), ": not used by ", kernel,
                                                   " (got ", value, "); leave it unset"));
  }
  return absl::OkStatus();
}

}  // namespace ahbm::launch
