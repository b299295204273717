// Chrome trace / Perfetto JSON export of an op log (DESIGN §5): one track per engine, so a person
// can see the bubble. Plain C++, no CAF.
//
// Contract:
// - Output: {"traceEvents":[...],"displayTimeUnit":"ns","otherData":{header fields}}, valid JSON,
//   one event per line; strings are JSON-escaped (", \ and control characters; other bytes are
//   passed through, proto3 strings being UTF-8).
// - Each op record is one "X" (complete) event: name = label if set, else op; cat "op";
//   args {op, seq, cmd_id, request_id, bytes_read, bytes_written, flops}.
//   Each stall record is one "X" event: name = waits_on; cat "stall"; args {cmd_id, request_id}.
//   Issue records are not drawn.
// - ts = start_ps / 1e6 and dur = (end - start) / 1e6 microseconds, printed in fixed notation
//   with 6 decimals: exact to the picosecond.
// - Process (pid) = PeOrCubePrefix(unit_name) of the op's unit; for a stall, pe_name(pe) (or
//   "pe<pe>" when pe_name is null; StallRecord carries no name). Thread (tid) = the unit, named
//   by unit_name minus "<process>." ("gemm", "hbm12", "ipcq.E"); a PE's stalls go on the thread
//   "cpu stalls" of that PE's process. A unit's name is its first op record's unit_name.
// - Lanes: events overlapping in time on one track (e.g. concurrent DMA commands) would not
//   nest, so each track is split greedily into lanes: its events sorted by
//   (start_ps, end_ps, record index) each take the lowest lane whose last event ended at or
//   before their start. Lane 0 keeps the track's name, lane k > 0 is named "<name> #k".
// - Deterministic numbering: processes sorted by name in natural order (digit runs compared as
//   numbers: "sip0.cube2" < "sip0.cube10"; a name before its extensions) get pid 1, 2, ...;
//   inside a process, the stall track first, then units by unit id, then lane, get tid 1, 2, ....
//   process_name/thread_name and process_sort_index/thread_sort_index metadata events (sort
//   index = pid / tid) come first; then the X events in record order.
// - Records must satisfy ValidateOpLog's time invariants (end >= start); violations fail an
//   AHBM_CHECK. A header is optional.
#ifndef AHBMSIM_ACTORS_OBSERVE_CHROME_TRACE_H_
#define AHBMSIM_ACTORS_OBSERVE_CHROME_TRACE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "proto/trace.pb.h"

namespace ahbm::observe {

// The PE or CUBE a unit belongs to: the longest leading run of "sip<n>", "cube<n>", "pe<n>"
// components, in that order. "sip0.cube3.pe2.gemm" -> "sip0.cube3.pe2",
// "sip0.cube2.noc" -> "sip0.cube2", "sip1.ucie" -> "sip1"; a name with no such prefix (or
// nothing after it) is its own group.
std::string PeOrCubePrefix(const std::string& unit_name);

// Natural-order "less than" used for process order (see the contract).
bool NaturalLess(const std::string& a, const std::string& b);

// Names a global PE index (StallRecord.pe) for the stall tracks, e.g. from topology::ChipIndex:
// Name(PeUnit(kPeCpu, PeOf(pe))) minus ".cpu".
using PeNamer = std::function<std::string(uint32_t pe)>;

std::string ChromeTraceJson(const std::vector<pb::TraceRecord>& records,
                            const PeNamer& pe_name = nullptr);

}  // namespace ahbm::observe

#endif  // AHBMSIM_ACTORS_OBSERVE_CHROME_TRACE_H_
