#include "sweep/grid.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/check.h"
#include "base/text_escape.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"
#include "kernels/launch/launch.h"
#include "kernels/launch/workload_io.h"
#include "sweep/job.h"
#include "topology/validate.h"

namespace ahbm::sweep {

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

bool IsWorkloadField(const std::string& name) {
  return name.find('.') == std::string::npos &&
         pb::Workload::descriptor()->FindFieldByName(name) != nullptr;
}

std::string Ratio(double r) { return absl::StrFormat("%.4f", r); }

std::string StatusText(const absl::Status& s) { return s.ok() ? "ok" : std::string(s.message()); }

}  // namespace

absl::StatusOr<std::vector<const FieldDescriptor*>> ResolveChipPath(const std::string& path) {
  const std::vector<std::string> parts = absl::StrSplit(path, '.');
  std::vector<const FieldDescriptor*> chain;
  const google::protobuf::Descriptor* type = pb::Chip::descriptor();
  for (size_t i = 0; i < parts.size(); ++i) {
    const FieldDescriptor* field = type->FindFieldByName(parts[i]);
    if (field == nullptr) {
      return absl::NotFoundError(
          absl::StrCat(path, ": no field '", parts[i], "' in ", type->name()));
    }
    if (field->is_repeated()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", parts[i], " is a repeated field (not settable)"));
    }
    const bool last = i + 1 == parts.size();
    const bool is_message = field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    if (last && is_message) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", parts[i], " is a message; name one of its fields"));
    }
    if (!last && !is_message) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": ", parts[i], " is not a message (no field '", parts[i + 1], "' under it)"));
    }
    chain.push_back(field);
    if (is_message) type = field->message_type();
  }
  return chain;
}

absl::Status SetChipField(pb::Chip& chip, const std::string& path, const std::string& value) {
  absl::StatusOr<std::vector<const FieldDescriptor*>> chain = ResolveChipPath(path);
  if (!chain.ok()) return absl::InvalidArgumentError(chain.status().message());
  Message* message = &chip;
  for (size_t i = 0; i + 1 < chain->size(); ++i) {
    message = message->GetReflection()->MutableMessage(message, (*chain)[i]);
  }
  const FieldDescriptor* field = chain->back();
  const google::protobuf::Reflection* reflection = message->GetReflection();
  const auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what, " (got '", value, "')"));
  };
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_UINT32: {
      uint32_t v = 0;
      if (!absl::SimpleAtoi(value, &v)) return bad("must be an integer in [0, 4294967295]");
      reflection->SetUInt32(message, field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t v = 0;
      if (!absl::SimpleAtoi(value, &v)) {
        return bad("must be an integer in [0, 18446744073709551615]");
      }
      reflection->SetUInt64(message, field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      const google::protobuf::EnumDescriptor* e = field->enum_type();
      std::vector<std::string> names;
      for (int k = 0; k < e->value_count(); ++k) {
        if (absl::AsciiStrToUpper(value) == e->value(k)->name()) {
          reflection->SetEnum(message, field, e->value(k));
          return absl::OkStatus();
        }
        names.push_back(absl::AsciiStrToLower(e->value(k)->name()));
      }
      return bad(absl::StrCat("must be one of ", absl::StrJoin(names, ", ")));
    }
    case FieldDescriptor::CPPTYPE_STRING:
      reflection->SetString(message, field, value);
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(absl::StrCat(path, ": unsupported field type"));
  }
}

absl::StatusOr<std::vector<Point>> BuildGrid(const pb::Chip& chip, const pb::Workload& workload,
                                             const std::vector<Param>& params) {
  // Every name and value is checked on a scratch copy before the grid is built.
  for (const Param& param : params) {
    if (param.values.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--values: ", param.name, ": no values"));
    }
    const bool on_workload = IsWorkloadField(param.name);
    if (!on_workload) {
      const absl::Status path = ResolveChipPath(param.name).status();
      if (absl::IsNotFound(path)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--param: '", param.name, "' is neither a workload field nor a topology field (",
            path.message(), ")"));
      }
      if (!path.ok()) return absl::InvalidArgumentError(absl::StrCat("--param: ", path.message()));
    }
    for (const std::string& value : param.values) {
      pb::Chip scratch_chip = chip;
      pb::Workload scratch_workload = workload;
      const absl::Status s = on_workload
                                 ? launch::SetWorkloadField(scratch_workload, param.name, value)
                                 : SetChipField(scratch_chip, param.name, value);
      if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("--values: ", s.message()));
    }
  }
  std::vector<Point> points;
  std::vector<size_t> at(params.size(), 0);
  while (true) {
    Point point;
    point.chip = chip;
    point.workload = workload;
    bool chip_changed = false;
    for (size_t p = 0; p < params.size(); ++p) {
      const std::string& value = params[p].values[at[p]];
      point.values.push_back(value);
      if (IsWorkloadField(params[p].name)) {
        const absl::Status set = launch::SetWorkloadField(point.workload, params[p].name, value);
        AHBM_CHECK(set.ok()) << "a value checked above: " << set;
      } else {
        const absl::Status set = SetChipField(point.chip, params[p].name, value);
        AHBM_CHECK(set.ok()) << "a value checked above: " << set;
        chip_changed = true;
      }
    }
    if (chip_changed) point.refused = topology::Validate(point.chip);
    if (point.refused.ok()) point.refused = launch::ValidateWorkload(point.chip, point.workload);
    points.push_back(std::move(point));
    // The next index, last parameter fastest.
    size_t p = params.size();
    while (p > 0 && ++at[p - 1] == params[p - 1].values.size()) at[--p] = 0;
    if (p == 0) break;
  }
  return points;
}

Row MakeRow(const Point& point, const pb::JobResult* result) {
  Row row;
  row.values = point.values;
  row.workload = point.workload;
  row.status = point.refused;
  if (!row.status.ok() || result == nullptr) return row;
  row.status = JobStatus(*result);
  if (!result->has_report()) return row;
  row.ran = true;
  row.latency_ps = result->report().latency_ps();
  row.roofline_bound_ps = result->report().roofline().bound_ps();
  row.roofline_ratio = result->report().roofline_ratio();
  row.binding = result->report().roofline().binding_resource();
  row.events = result->report().events();
  return row;
}

std::string WorkloadSummary(const pb::Workload& workload) {
  std::vector<const FieldDescriptor*> fields;
  workload.GetReflection()->ListFields(workload, &fields);
  std::vector<std::string> parts;
  const google::protobuf::Reflection* r = workload.GetReflection();
  for (const FieldDescriptor* f : fields) {
    std::string value;
    if (f->is_repeated()) {
      std::vector<std::string> items;
      for (int i = 0; i < r->FieldSize(workload, f); ++i) {
        items.push_back(absl::StrCat(r->GetRepeatedUInt64(workload, f, i)));
      }
      value = absl::StrJoin(items, ";");
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_ENUM) {
      value = absl::AsciiStrToLower(r->GetEnum(workload, f)->name());
    } else {
      std::string text;
      google::protobuf::TextFormat::PrintFieldValueToString(workload, f, -1, &text);
      value = text;
    }
    parts.push_back(absl::StrCat(f->name(), "=", value));
  }
  return absl::StrJoin(parts, " ");
}

namespace {

std::string Variant(const Row& row) {
  return row.workload.has_variant()
             ? absl::AsciiStrToLower(pb::Variant_Name(row.workload.variant()))
             : "";
}

}  // namespace

std::string FormatCsv(const std::vector<Param>& params, const std::vector<Row>& rows) {
  std::vector<std::string> header;
  for (const Param& p : params) header.push_back(CsvField(p.name));
  for (const char* c : {"workload", "latency_ps", "roofline_bound_ps", "roofline_ratio", "binding",
                        "events", "status"}) {
    header.push_back(c);
  }
  std::string out = absl::StrCat(absl::StrJoin(header, ","), "\n");
  for (const Row& row : rows) {
    std::vector<std::string> cells;
    for (const std::string& v : row.values) cells.push_back(CsvField(v));
    cells.push_back(CsvField(WorkloadSummary(row.workload)));
    if (row.ran) {
      cells.push_back(absl::StrCat(row.latency_ps));
      cells.push_back(absl::StrCat(row.roofline_bound_ps));
      cells.push_back(Ratio(row.roofline_ratio));
      cells.push_back(CsvField(row.binding));
      cells.push_back(absl::StrCat(row.events));
    } else {
      cells.insert(cells.end(), 5, "");
    }
    cells.push_back(CsvField(StatusText(row.status)));
    absl::StrAppend(&out, absl::StrJoin(cells, ","), "\n");
  }
  return out;
}

std::string FormatJson(const std::vector<Param>& params, const std::vector<Row>& rows) {
  std::string out = "{\"params\": [";
  for (size_t i = 0; i < params.size(); ++i) {
    absl::StrAppend(&out, i ? ", " : "", JsonString(params[i].name));
  }
  absl::StrAppend(&out, "],\n \"rows\": [");
  for (size_t r = 0; r < rows.size(); ++r) {
    const Row& row = rows[r];
    absl::StrAppend(&out, r ? ",\n  " : "\n  ", "{\"values\": {");
    for (size_t i = 0; i < params.size(); ++i) {
      absl::StrAppend(&out, i ? ", " : "", JsonString(params[i].name), ": ",
                      JsonString(row.values[i]));
    }
    absl::StrAppend(&out, "}, \"workload\": ", JsonString(WorkloadSummary(row.workload)));
    if (row.ran) {
      absl::StrAppend(&out, ", \"latency_ps\": ", row.latency_ps,
                      ", \"roofline_bound_ps\": ", row.roofline_bound_ps,
                      ", \"roofline_ratio\": ", Ratio(row.roofline_ratio),
                      ", \"binding\": ", JsonString(row.binding), ", \"events\": ", row.events);
    }
    absl::StrAppend(&out, ", \"status\": ", JsonString(StatusText(row.status)), "}");
  }
  absl::StrAppend(&out, "\n ]}\n");
  return out;
}

std::string FormatTable(const std::vector<Param>& params, const std::vector<Row>& rows) {
  std::vector<std::vector<std::string>> table;
  std::vector<std::string> header;
  bool variant_column = true;  // unless a parameter shows it
  for (const Param& p : params) {
    header.push_back(p.name);
    variant_column &= p.name != "variant";
  }
  if (variant_column) header.push_back("variant");
  for (const char* c : {"latency us", "x roofline", "binding", "status"}) header.push_back(c);
  table.push_back(header);
  for (const Row& row : rows) {
    std::vector<std::string> cells = row.values;
    if (variant_column) cells.push_back(Variant(row));
    cells.push_back(row.ran ? absl::StrFormat("%.3f", row.latency_ps / 1e6) : "-");
    cells.push_back(row.ran ? absl::StrFormat("%.2f", row.roofline_ratio) : "-");
    cells.push_back(row.ran ? row.binding : "-");
    cells.push_back(StatusText(row.status));
    table.push_back(cells);
  }
  std::vector<size_t> width(header.size(), 0);
  for (const auto& cells : table) {
    for (size_t c = 0; c + 1 < cells.size(); ++c) width[c] = std::max(width[c], cells[c].size());
  }
  std::string out;
  for (const auto& cells : table) {
    for (size_t c = 0; c < cells.size(); ++c) {
      const bool last = c + 1 == cells.size();
      absl::StrAppend(&out, cells[c],
                      last ? "\n" : std::string(width[c] - cells[c].size() + 2, ' '));
    }
  }
  return out;
}

}  // namespace ahbm::sweep
