// A seeded generator of valid decode and prefill workloads on topology/small.textproto (1 SIP,
// 2x4 CUBEs of 2x2 PEs), for the random differential test (random_diff.h).
//
// Contract: the same seed gives the same workload. Every kernel and variant, every option the
// workload schema has for them, is drawn: G, d, S (S < C·P and max_context > S included), T_q,
// C and the group shape, P, tile, q_tile, users with mixed request lengths, rotation, reduce
// payload / merge / topology, query split, the AUTO threshold, prefill's lookahead, ring_depth
// and ring_message_bytes, both issue-cost profiles, FIFO or BANK HBM channels and the KV bank
// layout, the K layout (ADR kernels), the scheduler's max_inflight_composites, and the decode
// sweep's forms (OPT2_LOOKAHEAD, BASELINE_DOT, lookahead, one_shot). A
// workload is meant to be valid; the only refusal the test accepts is a capacity one (TCM, HBM,
// the data-mode host bound). A new form or knob joins the generator when it joins the schema.
#ifndef AHBMSIM_TESTS_RANDOM_WORKLOAD_H_
#define AHBMSIM_TESTS_RANDOM_WORKLOAD_H_

#include <cstdint>
#include <string>

#include "proto/workload.pb.h"

namespace ahbm::testing {

struct RandomCase {
  pb::Workload workload;  // data mode off; the caller sets data and seed
  // Run on the small chip with BANK HBM channels (topology/small_bank.textproto) rather than
  // its FIFO ones; kv_bank_layout is drawn only then (FIFO channels refuse it).
  bool bank_hbm = false;
};

// The case for `seed`.
RandomCase RandomWorkload(uint64_t seed);

// The `ahbm run` line that runs `w` on the small chip: "--kernel=decode --variant=opt3 ...".
std::string RunFlags(const pb::Workload& w);

}  // namespace ahbm::testing

#endif  // AHBMSIM_TESTS_RANDOM_WORKLOAD_H_
