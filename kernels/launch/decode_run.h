// The DECODE launcher (launcher.h; registered in decode_run.cc): the GQA decode kernels of
// kernels/attention on a workload — defaults, validation, inputs, placement and instances,
// outputs, the report's reduce critical path, and the `ahbm compare` rows. The template for a
// new kernel's `<kernel>_run.cc`.
//
// Contract:
// - Defaults (Llama3-70B, DESIGN §2/§6) for fields left 0: h_q 64, h_kv 8, d 128, t_q 1,
//   tile 256, users 1, variant OPT3, reduce topologies TREE, k_layout TILE_MAJOR; the geometry
//   follows the chip: p = the CUBE's PEs, c = the largest C <= 8 whose CUBE Groups host the KV
//   heads (AUTO's rule below; 8 on the full chip).
//   `s` must be set. Variants: OPT1, OPT2, OPT3, OPT2_LOOKAHEAD, BASELINE_DOT
//   (kernels/attention/decode.h; the sweep's fields lookahead and one_shot, and which variants
//   take them: ApplySweepFields in decode_run.cc; max_inflight_composites applies to the chip
//   before Prepare, launch::WorkloadChip), SHORT_CONTEXT
//   (opt3 sweeps with kv_per_cube whole heads per CUBE, default 1, C = 1), AUTO (DispatchAuto:
//   SHORT_CONTEXT below short_long_threshold, unset = kShortLongThreshold, else OPT3 with the
//   largest C <= 8 whose CUBE Groups the chip hosts for the KV heads — C divides a SIP's
//   CUBEs, HostsKvHeads in attention_geometry.h; its short pick takes the fewest kv_per_cube of
//   1, 2, 4, 8 that hosts them unless kv_per_cube is given) and the baselines BASELINE_FANOUT, BASELINE_FANOUT_GROUP, BASELINE_REV1_TREE
//   (kernels/attention/baseline.h; T_q = 1; BASELINE_FANOUT and BASELINE_REV1_TREE keep a head
//   in one CUBE: C = 1, and c, group_rows or group_cols above 1 are refused; `ahbm compare`
//   clears them for those rows); other variants (the prefill ones) are refused as not DECODE
//   variants.
//   Fields outside DecodeLauncher::Fields() (gemm_*, vector_len, cube, q_tile, query_split)
//   are refused by the shared path; kv_per_cube only with SHORT_CONTEXT / AUTO, short_long_threshold only with AUTO. AUTO
//   picks C itself: c, group_rows, group_cols are refused with it, and kv_per_cube when it
//   picks OPT3. The report's workload line says what AUTO picked and why (and its C or
//   kv_per_cube when not the default: "AUTO -> OPT3 (S 3000 >= threshold 2049; C 4, the
//   largest C <= 8 that hosts 2 KV heads)").
// - Capacity, checked before anything is placed or simulated (one line, exit 2 in `ahbm`):
//   KV caches per PE against its HBM region and instances per PE against its TCM arenas
//   (kernels::CheckDecodeCapacity; the baselines: their K/V blocks against HBM; the fan-out
//   baselines also each instance's TCM, named d, s or users / h_q, and their first ring send
//   of m, l, O against the IPCQ / NOC endpoint queue, named d), and in data mode the
//   host-memory estimate against kDataModeHostBytes.
//   reduce_payload / reduce_merge (the ADR reduce's options, kernels/README.md) are refused
//   for the baselines, which do not run the ADR reduce.
// - k_layout (KLayoutOf; kernels/attention/k_layout.h): TILE_MAJOR, TRANSPOSED or ROW_MAJOR
//   for the ADR kernels (OPT1, OPT2, OPT3, SHORT_CONTEXT, AUTO); the baselines read each
//   rank's K as one [d, B] block of their own and refuse any k_layout given (`ahbm compare`
//   clears it for their rows). The workload line names a layout other than TILE_MAJOR.
// - Data mode: q.npy [H_q, T_q, d], k.npy and v.npy [H_kv, S, d] from inputs_dir (one request:
//   users must be 1), else drawn from `seed` (Q, K ~ N(0, 1), V ~ U(-2, 2), one set per
//   request); outputs o.npy [H_q, T_q, d] (users = 1) or o<u>.npy per request.
// - The report's roofline includes the communication critical path of the static reduce:
//   Level-2 rounds x one IPCQ (m, l, O) triplet of G·T_q rows, plus Level-1 rounds x one NOC
//   hop triplet; a triplet = one link latency + the serialisation of its three messages. The
//   baselines give their rounds the same way (DecodeLaunch): BASELINE_FANOUT P − 1 IPCQ
//   triplets of one row; BASELINE_FANOUT_GROUP C·P − 1 ring steps, min(C, C·P − 1) of them
//   on the NOC when C > 1, each carrying the G query heads' triplets over one link (counted as
//   one triplet of G rows); BASELINE_REV1_TREE ⌈log₂P⌉ IPCQ triplets of G rows.
//   A level reduced by the chunked ring (RING_REDUCE, R nodes) counts 2 (R − 1) rounds: R − 1
//   of one chunk's m, l and O columns (the widest chunk), then R − 1 of its O columns.
//   level2_reduce RING_REDUCE is refused for BASELINE_REV1_TREE (rev1 reduces by a tree;
//   `ahbm compare` runs that row with rev1's tree).
//   reduce_rounds is that round count.
//   The bound is the same for reduce_payload PACKED (one message of the same bytes: one link
//   latency less per hop, kept as is so the options compare against one bound).
// - `ahbm compare` (compare.h): rows opt1, opt3, opt2, baseline_fanout, baseline_rev1_tree,
//   x_base against baseline_fanout; --reduce_options rows opt1, opt3, opt2; s defaults to
//   131072; short_long_threshold is refused unless auto is a row, and cleared for the others;
//   c and the group shape are cleared for baseline_fanout and baseline_rev1_tree, k_layout
//   for every baseline.
#ifndef AHBMSIM_KERNELS_LAUNCH_DECODE_RUN_H_
#define AHBMSIM_KERNELS_LAUNCH_DECODE_RUN_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/attention/decode_launch.h"
#include "proto/topology.pb.h"
#include "proto/workload.pb.h"

namespace ahbm::launch {

// The short/long decode dispatcher's threshold (variant AUTO): contexts shorter than this run
// the short-context kernel (whole heads per CUBE, kv_per_cube 1), longer ones the long-context
// opt3 kernel (C = P = 8 by default). Measured, not the ADR's 256 K: Llama3-70B decode on
// topology/chip_4sip.textproto, profile zero, `ahbm compare --variants=short_context,opt3
// --s=S`: S = 2047 short 1950 ns / long 2024 ns; 2048: 1951 / 2025; 2049: 2138 / 1993 (the
// short kernel's PEs need a second 256-key tile); 2050: 2138 / 1993. The long kernel wins from
// 2049 on (launch_test checks two points each side). Re-measured with NOC receive flow control
// (noc.endpoint_queue_bytes 256 KiB): the same numbers; with a 4 KiB endpoint queue the long
// kernel pays credit waits (2048: 2061 ns, 2049: 2061 ns) and still wins from 2049. Workload
// field short_long_threshold overrides it.
inline constexpr uint64_t kShortLongThreshold = 2049;

// The prefill dispatcher's threshold (PREFILL variant AUTO): prompts shorter than this run the
// short-context prefill (kv_per_cube 1: 8 CUBEs), longer ones the ring (C = G = 8: 64 CUBEs).
// Measured, Llama3-70B on topology/chip_4sip.textproto, profile zero, T_q = S, default tiles,
// `ahbm compare --kernel=prefill --variants=short_context,ring --s=S` (µs, short / ring):
// 512: 65.9 / 79.5; 640: 93.3 / 94.6; 704: 106.6 / 109.0; 705: 106.9 / 101.7; 712: 107.0 /
// 103.1; 800: 134.2 / 121.1; 1024: 169.4 / 142.1. Up to 704 the short kernel wins, from 705
// the ring, with two exceptions in the tile-granular band: 720 (ring ahead by 0.1%) and 784
// (short ahead by 0.8%). The ring's sub-blocks are S / 64 keys: at short S its tiles are mostly
// padding and its barriers dominate; the ADR's 256 K is far off for prefill too.
inline constexpr uint64_t kPrefillShortLongThreshold = 705;

// The short/long dispatcher shared by DECODE and PREFILL (variant AUTO): for a workload whose
// (longest) context length is `s`, SHORT_CONTEXT when s < threshold, else the long kernel
// (DECODE: OPT3; PREFILL: RING); `why` = "S 1024 < threshold 2049". The threshold is the
// workload's short_long_threshold, else the kernel's measured default.
struct AutoChoice {
  pb::Variant variant = pb::OPT3;
  uint64_t threshold = 0;
  std::string why;
};
AutoChoice DispatchAuto(const pb::Workload& w, uint64_t s);

// AUTO's short kernel takes the fewest KV heads per CUBE (of 1, 2, 4, 8) that the chip hosts:
// each further head on a CUBE adds its whole sweep to every one of the CUBE's PEs, and the
// CUBEs it frees do not help one batch (the short kernel keeps every request of a head on that
// head's CUBE). Measured, Llama3-70B decode on topology/chip_4sip.textproto, S = 1024,
// `ahbm run --kernel=decode --variant=short_context --s=1024 --kv_per_cube=K [--users=4]
// [--issue_cost_profile=realistic]`, latency µs for K = 1 / 2 / 4 / 8: zero profile 1.70 /
// 2.06 / 3.47 / 6.53, 4 users 3.42 / 6.27 / 12.53 / 25.79; realistic 3.16 / 3.92 / 6.30 /
// 12.19, 4 users 6.31 / 11.75 / 23.88 / 46.82 (launch_test's AutoShortKvPerCubeIsTheFastest
// holds the rule on the small chip). The report's workload line says so:
// "kv_per_cube 1, the fewest KV heads per CUBE that host 8 KV heads (latency grows with ...)".
std::string ShortKvPerCubeWhy(uint32_t kv_per_cube, uint32_t h_kv);

// Data mode keeps every value on the host: a run whose estimate (inputs, outputs and the HBM
// image of K, V, Q, O) exceeds this bound is refused up front (field data).
inline constexpr uint64_t kDataModeHostBytes = uint64_t{4} << 30;

// The workload's k_layout (unset: TILE_MAJOR), shared by DECODE and PREFILL. `own_layout`:
// the variant reads K in a layout of its own (the baselines), so any k_layout given is
// refused: "k_layout: BASELINE_FANOUT reads each rank's K as one [d, B] block of its own;
// k_layout applies to the ADR kernels (leave it unset)".
absl::StatusOr<kernels::KLayout> KLayoutOf(const pb::Workload& w, bool own_layout);
// The report's workload line: ", K TRANSPOSED" for a layout other than TILE_MAJOR, else "".
std::string KLayoutText(kernels::KLayout layout);

// The decode configuration of a DECODE workload (defaults applied), or the field's error
// (DecodeLauncher::Prepare without the shared unused-field check).
absl::StatusOr<kernels::DecodeConfig> DecodeConfigOf(const pb::Chip& chip, const pb::Workload& w);

// The legs of the launch's static reduce (its communication critical path): level-2 rounds
// over IPCQ, level-1 rounds over the NOC, each an (m, l, O) triplet in fp32; a level reduced
// by the chunked ring of R nodes is two legs: R - 1 rounds of a chunk's m, l and O columns,
// then R - 1 rounds of its O columns.
std::vector<pb::CommHop> DecodeCommHops(const kernels::DecodeConfig& cfg,
                                        const kernels::DecodeLaunch& launch);

}  // namespace ahbm::launch

#endif  // AHBMSIM_KERNELS_LAUNCH_DECODE_RUN_H_
