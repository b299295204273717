#include "actors/observe/chrome_trace.h"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/check.h"
#include "base/text_escape.h"

namespace ahbm::observe {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// "<word><digits>" with at least one digit.
bool IsIndexedComponent(const std::string& component, const std::string& word) {
  if (component.size() <= word.size() || component.compare(0, word.size(), word) != 0) {
    return false;
  }
  return std::all_of(component.begin() + word.size(), component.end(), IsDigit);
}

// ps as microseconds, exactly: "<ps / 1e6>.<6 digits>".
std::string Micros(uint64_t ps) { return absl::StrFormat("%d.%06d", ps / 1000000, ps % 1000000); }

// A track before lane splitting: a unit's ops, or a PE's stalls.
struct TrackKey {
  bool stall = false;
  uint32_t id = 0;  // unit id, or global PE index for stalls
  // Stall tracks first, then units by id.
  friend bool operator<(const TrackKey& a, const TrackKey& b) {
    return std::make_tuple(!a.stall, a.id) < std::make_tuple(!b.stall, b.id);
  }
};

struct Event {
  size_t record = 0;  // index in the records
  uint64_t start_ps = 0;
  uint64_t end_ps = 0;
  size_t lane = 0;
};

struct Track {
  std::string process;
  std::string name;            // thread name of lane 0
  std::vector<size_t> events;  // indices into the event list
  size_t lanes = 0;
};

// Greedy lane assignment (see the contract).
void AssignLanes(Track& track, std::vector<Event>& events) {
  std::vector<size_t> order = track.events;
  std::sort(order.begin(), order.end(), [&events](size_t a, size_t b) {
    return std::make_tuple(events[a].start_ps, events[a].end_ps, events[a].record) <
           std::make_tuple(events[b].start_ps, events[b].end_ps, events[b].record);
  });
  std::vector<uint64_t> lane_end;
  for (const size_t e : order) {
    size_t lane = 0;
    while (lane < lane_end.size() && lane_end[lane] > events[e].start_ps) ++lane;
    if (lane == lane_end.size()) lane_end.push_back(0);
    lane_end[lane] = events[e].end_ps;
    events[e].lane = lane;
  }
  track.lanes = lane_end.size();
}

std::string ThreadName(const std::string& process, const std::string& unit_name) {
  if (unit_name.size() > process.size() + 1 && unit_name.compare(0, process.size(), process) == 0 &&
      unit_name[process.size()] == '.') {
    return unit_name.substr(process.size() + 1);
  }
  return unit_name;
}

}  // namespace

std::string PeOrCubePrefix(const std::string& unit_name) {
  static const char* const kLevels[] = {"sip", "cube", "pe"};
  const std::vector<std::string> components = absl::StrSplit(unit_name, '.');
  size_t matched = 0;
  while (matched < components.size() && matched < std::size(kLevels) &&
         IsIndexedComponent(components[matched], kLevels[matched])) {
    ++matched;
  }
  if (matched == 0 || matched == components.size()) return unit_name;
  return absl::StrJoin(components.begin(), components.begin() + matched, ".");
}

bool NaturalLess(const std::string& a, const std::string& b) {
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() && j < b.size()) {
    if (IsDigit(a[i]) && IsDigit(b[j])) {
      size_t i_end = i;
      size_t j_end = j;
      while (i_end < a.size() && IsDigit(a[i_end])) ++i_end;
      while (j_end < b.size() && IsDigit(b[j_end])) ++j_end;
      size_t i_sig = i;
      size_t j_sig = j;
      while (i_sig + 1 < i_end && a[i_sig] == '0') ++i_sig;
      while (j_sig + 1 < j_end && b[j_sig] == '0') ++j_sig;
      const std::string x = a.substr(i_sig, i_end - i_sig);
      const std::string y = b.substr(j_sig, j_end - j_sig);
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      i = i_end;
      j = j_end;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  if ((i < a.size()) != (j < b.size())) return i >= a.size();
  return a < b;  // equal up to leading zeros: plain order keeps it total
}

namespace {

// The op log's spans by track (a unit's ops, a PE's CPU stalls) and the header, if any.
struct CollectedTracks {
  std::map<TrackKey, Track> tracks;
  std::vector<Event> events;
  std::vector<TrackKey> event_track;  // by event
  const pb::TraceHeader* header = nullptr;
};

CollectedTracks CollectTracks(const std::vector<pb::TraceRecord>& records,
                              const PeNamer& pe_name) {
  CollectedTracks c;
  for (size_t r = 0; r < records.size(); ++r) {
    const pb::TraceRecord& record = records[r];
    TrackKey key;
    Event event;
    event.record = r;
    if (record.has_header()) {
      if (c.header == nullptr) c.header = &record.header();
      continue;
    } else if (record.has_op()) {
      const pb::OpRecord& op = record.op();
      AHBM_CHECK(op.end_ps() >= op.start_ps())
          << "op seq " << op.seq() << " ends before it starts (record " << r
          << "); validate the op log first";
      key = TrackKey{/*stall=*/false, op.unit()};
      event.start_ps = op.start_ps();
      event.end_ps = op.end_ps();
      if (!c.tracks.count(key)) {
        Track& track = c.tracks[key];
        track.process = PeOrCubePrefix(op.unit_name());
        track.name = ThreadName(track.process, op.unit_name());
      }
    } else if (record.has_stall()) {
      const pb::StallRecord& stall = record.stall();
      AHBM_CHECK(stall.to_ps() >= stall.from_ps())
          << "stall of pe " << stall.pe() << " ends before it starts (record " << r
          << "); validate the op log first";
      key = TrackKey{/*stall=*/true, stall.pe()};
      event.start_ps = stall.from_ps();
      event.end_ps = stall.to_ps();
      if (!c.tracks.count(key)) {
        Track& track = c.tracks[key];
        track.process = pe_name ? pe_name(stall.pe()) : absl::StrCat("pe", stall.pe());
        track.name = "cpu stalls";
      }
    } else {
      continue;
    }
    c.tracks[key].events.push_back(c.events.size());
    c.events.push_back(event);
    c.event_track.push_back(key);
  }
  return c;
}

// The traceEvents array being written: comma-separated events, one per line.
class EventWriter {
 public:
  explicit EventWriter(std::string* out) : out_(*out) {}
  std::string& Begin() {
    if (!first_) out_.append(",\n");
    first_ = false;
    return out_;
  }
  // A metadata event: args {arg: text} or {arg: number}.
  void Metadata(const char* name, int pid, int tid, const char* arg, const std::string* text,
                int number) {
    absl::StrAppend(&Begin(), "{\"name\":\"", name, "\",\"ph\":\"M\",\"pid\":", pid,
                    ",\"tid\":", tid, ",\"args\":{\"", arg, "\":");
    if (text != nullptr) {
      AppendJsonString(&out_, *text);
    } else {
      absl::StrAppend(&out_, number);
    }
    out_.append("}}");
  }

 private:
  std::string& out_;
  bool first_ = true;
};

// One span as a complete event ("ph":"X") on thread `tid` of process `pid`.
void AppendSpan(std::string& out, const pb::TraceRecord& record, const Event& event, int pid,
                int tid) {
  out.append("{\"name\":");
  if (record.has_op()) {
    const pb::OpRecord& op = record.op();
    AppendJsonString(&out, op.label().empty() ? op.op() : op.label());
    out.append(",\"cat\":\"op\"");
  } else {
    AppendJsonString(&out, record.stall().waits_on());
    out.append(",\"cat\":\"stall\"");
  }
  absl::StrAppend(&out, ",\"ph\":\"X\",\"pid\":", pid, ",\"tid\":", tid,
                  ",\"ts\":", Micros(event.start_ps),
                  ",\"dur\":", Micros(event.end_ps - event.start_ps), ",\"args\":{");
  if (record.has_op()) {
    const pb::OpRecord& op = record.op();
    out.append("\"op\":");
    AppendJsonString(&out, op.op());
    absl::StrAppend(&out, ",\"seq\":", op.seq(), ",\"cmd_id\":", op.cmd_id(),
                    ",\"request_id\":", op.request_id(), ",\"bytes_read\":", op.bytes_read(),
                    ",\"bytes_written\":", op.bytes_written(), ",\"flops\":", op.flops());
  } else {
    absl::StrAppend(&out, "\"cmd_id\":", record.stall().cmd_id(),
                    ",\"request_id\":", record.stall().request_id());
  }
  out.append("}}");
}

// The run's identity from the op log's header.
void AppendOtherData(std::string& out, const pb::TraceHeader& header) {
  out.append(",\n\"otherData\":{\"topology_name\":");
  AppendJsonString(&out, header.topology_name());
  out.append(",\"topology_digest\":");
  AppendJsonString(&out, header.topology_digest());
  out.append(",\"workload_digest\":");
  AppendJsonString(&out, header.workload_digest());
  out.append(",\"issue_cost_profile\":");
  AppendJsonString(&out, header.issue_cost_profile());
  absl::StrAppend(&out, ",\"schema_version\":", header.schema_version(), "}");
}

}  // namespace

std::string ChromeTraceJson(const std::vector<pb::TraceRecord>& records, const PeNamer& pe_name) {
  CollectedTracks c = CollectTracks(records, pe_name);

  // Numbering: processes in natural name order; threads by (track key, lane).
  std::vector<std::string> processes;
  for (const auto& [key, track] : c.tracks) processes.push_back(track.process);
  std::sort(processes.begin(), processes.end(), NaturalLess);
  processes.erase(std::unique(processes.begin(), processes.end()), processes.end());
  std::map<std::string, int> pid_of;
  for (size_t p = 0; p < processes.size(); ++p) pid_of[processes[p]] = static_cast<int>(p) + 1;

  std::string out = "{\"traceEvents\":[\n";
  EventWriter writer(&out);
  // tid of (track, lane) inside its process; tracks iterate in TrackKey order.
  std::map<std::pair<TrackKey, size_t>, int> tid_of;
  std::map<std::string, int> threads_in;
  for (auto& [key, track] : c.tracks) AssignLanes(track, c.events);
  for (const std::string& process : processes) {
    const int pid = pid_of[process];
    writer.Metadata("process_name", pid, 0, "name", &process, 0);
    writer.Metadata("process_sort_index", pid, 0, "sort_index", nullptr, pid);
  }
  for (const auto& [key, track] : c.tracks) {
    const int pid = pid_of[track.process];
    for (size_t lane = 0; lane < track.lanes; ++lane) {
      const int tid = ++threads_in[track.process];
      tid_of[{key, lane}] = tid;
      const std::string name = lane == 0 ? track.name : absl::StrCat(track.name, " #", lane);
      writer.Metadata("thread_name", pid, tid, "name", &name, 0);
      writer.Metadata("thread_sort_index", pid, tid, "sort_index", nullptr, tid);
    }
  }
  for (size_t e = 0; e < c.events.size(); ++e) {
    const Event& event = c.events[e];
    const TrackKey& key = c.event_track[e];
    AppendSpan(writer.Begin(), records[event.record], event, pid_of[c.tracks[key].process],
               tid_of[{key, event.lane}]);
  }
  out.append("\n],\n\"displayTimeUnit\":\"ns\"");
  if (c.header != nullptr) AppendOtherData(out, *c.header);
  out.append("}\n");
  return out;
}

}  // namespace ahbm::observe
