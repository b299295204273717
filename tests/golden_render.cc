#include "tests/golden_render.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/ascii.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace ahbm::golden {
namespace {

std::string Double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

template <typename Ids>
std::string IdList(const Ids& ids) {
  return ids.empty() ? "-" : absl::StrJoin(ids, ",");
}

std::string Float(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
  return buf;
}

// A tensor as "hbm:pe1@32512:bf16[4,64]" (strides, when given, as "/s0,s1").
std::string TensorText(const pb::TensorRef& t) {
  std::string out = absl::StrCat(absl::AsciiStrToLower(pb::MemorySpace_Name(t.space())), ":pe",
                                 t.pe(), "@", t.addr(), ":",
                                 absl::AsciiStrToLower(pb::DType_Name(t.dtype())), "[",
                                 absl::StrJoin(t.shape(), ","), "]");
  if (t.strides_size() > 0) absl::StrAppend(&out, "/", absl::StrJoin(t.strides(), ","));
  return out;
}

std::string MessageText(const google::protobuf::Message& m);

std::string FieldValue(const google::protobuf::Message& m, const google::protobuf::FieldDescriptor* f,
                       int index) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* r = m.GetReflection();
  const bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
    case FieldDescriptor::CPPTYPE_INT64:
      return absl::StrCat(rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f));
    case FieldDescriptor::CPPTYPE_UINT32:
      return absl::StrCat(rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f));
    case FieldDescriptor::CPPTYPE_UINT64:
      return absl::StrCat(rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return Float(rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f), 17);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return Float(rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f), 9);
    case FieldDescriptor::CPPTYPE_BOOL:
      return (rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f)) ? "1" : "0";
    case FieldDescriptor::CPPTYPE_ENUM:
      return absl::AsciiStrToLower(
          (rep ? r->GetRepeatedEnum(m, f, index) : r->GetEnum(m, f))->name());
    case FieldDescriptor::CPPTYPE_STRING:
      return absl::StrCat("'", rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f), "'");
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return MessageText(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f));
  }
  return "?";
}

// Every set field in field-number order, "name=value" separated by spaces; repeated fields as
// "name=[a,b]"; tensors compact (TensorText); other messages in braces.
std::string MessageText(const google::protobuf::Message& m) {
  if (const auto* t = dynamic_cast<const pb::TensorRef*>(&m)) return TensorText(*t);
  const google::protobuf::Reflection* r = m.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  std::vector<std::string> parts;
  for (const google::protobuf::FieldDescriptor* f : fields) {
    if (f->is_repeated()) {
      std::vector<std::string> items;
      for (int i = 0; i < r->FieldSize(m, f); ++i) items.push_back(FieldValue(m, f, i));
      parts.push_back(absl::StrCat(f->name(), "=[", absl::StrJoin(items, ","), "]"));
    } else {
      parts.push_back(absl::StrCat(f->name(), "=", FieldValue(m, f, 0)));
    }
  }
  return absl::StrCat("{", absl::StrJoin(parts, " "), "}");
}

// The issued command: its kind and every field set (MessageText).
std::string CommandText(const pb::IssueRecord& issue) {
  const google::protobuf::Reflection* r = issue.GetReflection();
  const google::protobuf::OneofDescriptor* oneof =
      issue.GetDescriptor()->FindOneofByName("command");
  const google::protobuf::FieldDescriptor* f = r->GetOneofFieldDescriptor(issue, oneof);
  if (f == nullptr) return "none";
  return absl::StrCat(f->name(), " ", MessageText(r->GetMessage(issue, f)));
}

}  // namespace

std::string RenderRecord(const pb::TraceRecord& record) {
  switch (record.record_case()) {
    case pb::TraceRecord::kHeader: {
      const pb::TraceHeader& h = record.header();
      return absl::StrCat("header schema=", h.schema_version(), " topology=", h.topology_name(),
                          " topology_digest=", h.topology_digest(),
                          " workload_digest=", h.workload_digest(),
                          " profile=", h.issue_cost_profile(),
                          " per_tile_detail=", h.per_tile_detail() ? 1 : 0);
    }
    case pb::TraceRecord::kOp: {
      const pb::OpRecord& o = record.op();
      return absl::StrCat("op ", o.seq(), " ", o.unit_name(), "#", o.unit(), " ", o.op(),
                          " cmd=", o.cmd_id(), " t=", o.issue_ps(), "/", o.start_ps(), "/",
                          o.end_ps(), " rw=", o.bytes_read(), "/", o.bytes_written(),
                          " flops=", o.flops(), " dep=", IdList(o.depends_on()),
                          " req=", o.request_id(), " label='", o.label(), "'",
                          o.parent_cmd_id() != 0 ? absl::StrCat(" parent=", o.parent_cmd_id()) : "",
                          o.message_id() != 0 ? absl::StrCat(" msg=", o.message_id()) : "",
                          o.call() != 0 ? absl::StrCat(" call=", o.instance(), "/", o.call() - 1) : "");
    }
    case pb::TraceRecord::kIssue: {
      const pb::IssueRecord& i = record.issue();
      return absl::StrCat("issue pe=", i.pe(), " req=", i.request_id(), " cmd=", i.cmd_id(),
                          " t=", i.issue_ps(), " blocking=", i.blocking() ? 1 : 0,
                          " dep=", IdList(i.depends_on()),
                          " recv_dep=", IdList(i.recv_depends_on()), " ", CommandText(i),
                          i.call() != 0 ? absl::StrCat(" call=", i.instance(), "/", i.call() - 1) : "");
    }
    case pb::TraceRecord::kStall: {
      const pb::StallRecord& s = record.stall();
      return absl::StrCat("stall pe=", s.pe(), " req=", s.request_id(), " cmd=", s.cmd_id(),
                          " t=", s.from_ps(), "..", s.to_ps(), " waits_on='", s.waits_on(), "'");
    }
    case pb::TraceRecord::kInstance:
      return absl::StrCat("instance ", record.instance().ShortDebugString());
    case pb::TraceRecord::kLaunch:
      return absl::StrCat("launch ", record.launch().ShortDebugString());
    case pb::TraceRecord::kCall:
      return absl::StrCat("call ", record.call().ShortDebugString());
    case pb::TraceRecord::kReport:
      return absl::StrCat("report latency_ps=", record.report().latency_ps());
    case pb::TraceRecord::RECORD_NOT_SET:
      break;
  }
  return "empty";
}

void RenderOpLog(const std::vector<pb::TraceRecord>& records, std::string& out) {
  for (const pb::TraceRecord& r : records) {
    out += RenderRecord(r);
    out += '\n';
  }
}

void RenderReportHeader(const pb::Report& report, std::string& out) {
  const pb::Roofline& rf = report.roofline();
  absl::StrAppend(&out, "report topology=", report.topology_name(), "\n",
                  "report workload=", report.workload_summary(), "\n",
                  "report profile=", report.issue_cost_profile(), "\n",
                  "report latency_ps=", report.latency_ps(), "\n",
                  "report events=", report.events(), "\n",
                  "report roofline bound_ps=", rf.bound_ps(),
                  " comm_critical_path_ps=", rf.comm_critical_path_ps(), " binding='",
                  rf.binding_resource(), "' ratio=", Double(report.roofline_ratio()), "\n");
}

void RenderReport(const pb::Report& report, std::string& out) {
  RenderReportHeader(report, out);
  int idle = 0;
  for (const pb::UnitStats& u : report.units()) {
    if (u.busy_ps() == 0 && u.bytes_read() == 0 && u.bytes_written() == 0 && u.flops() == 0 &&
        u.ops() == 0 && u.work_ps() == 0) {
      ++idle;
      continue;
    }
    absl::StrAppend(&out, "unit ", u.unit_name(), "#", u.unit(), " ", u.kind(),
                    " busy_ps=", u.busy_ps(), " util=", Double(u.utilisation()),
                    " rw=", u.bytes_read(), "/", u.bytes_written(), " flops=", u.flops(),
                    " ops=", u.ops(), " work_ps=", u.work_ps(), "\n");
  }
  absl::StrAppend(&out, "units listed=", report.units_size() - idle, " idle=", idle, "\n");
  for (const pb::PeRoofline& p : report.roofline().pes()) {
    absl::StrAppend(&out, "pe_roofline ", p.pe(), " hbm_ps=", p.hbm_ps(),
                    " gemm_tile_plan_ps=", p.gemm_tile_plan_ps(), " gemm_peak_ps=",
                    p.gemm_peak_ps(), " math_ps=", p.math_ps(), " cpu_issue_ps=",
                    p.cpu_issue_ps(), " bound_ps=", p.bound_ps(), " binding='",
                    p.binding_resource(), "'\n");
  }
}

std::string Fnv1a64Hex(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace ahbm::golden
