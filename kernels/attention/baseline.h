// The pre-ADR decode baseline (ADR-0060 rev2 §A, §10; DESIGN §4b "Baselines place one head per
// CUBE"): every query head on its own CUBE (no GQA reuse: a KV head's K/V are read once per
// query head), the head's context split over the CUBE's P PEs; each rank computes a one-shot
// partial attention with blocking `dot`s straight from HBM (K stored transposed `[d, S_rank]`,
// V `[S_rank, d]`), then an all-to-all `(m, l, O)` fan-out around the CUBE's PE ring, R − 1
// steps, so every rank ends with the answer; rank 0 of the ring stores it.
#ifndef AHBMSIM_KERNELS_ATTENTION_BASELINE_H_
#define AHBMSIM_KERNELS_ATTENTION_BASELINE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/attention/decode_launch.h"
#include "kernels/memory/memory_store.h"
#include "kernels/runtime/runtime.h"
#include "kernels/runtime/task.h"
#include "kernels/runtime/tl.h"
#include "proto/topology.pb.h"

namespace ahbm::kernels {

struct BaselineRankPlan {
  uint32_t d = 128;
  float scale = 0;
  uint64_t q_addr = 0;  // [1, d] bf16
  uint64_t kt_addr = 0; // [d, len] bf16 (transposed block)
  uint64_t v_addr = 0;  // [len, d] bf16
  uint64_t len = 0;     // this rank's keys
  Peer next = Peer::Ipcq(topology::Dir::kEast);  // ring successor
  Peer prev = Peer::Ipcq(topology::Dir::kWest);  // ring predecessor
  uint32_t ranks = 1;
  bool store_output = false;
  uint64_t o_addr = 0;  // [1, d] bf16
};

Task<void> BaselineRank(Tl& tl, BaselineRankPlan plan);

// The CUBEs the baseline uses: query head h on global CUBE sip·cubes_per_sip + h (it needs
// h_q CUBEs from SIP `sip` on).
absl::StatusOr<std::vector<uint32_t>> BaselineCubes(const pb::Chip& chip, const DecodeConfig& cfg);

// Places the tensors (and the inputs in data mode) and adds every rank's kernel; the output
// of query head h is read back with GatherDecodeOutput (same layout: G = 1 per launch output).
absl::StatusOr<DecodeLaunch> LaunchBaseline(const pb::Chip& chip, const DecodeConfig& cfg,
                                            KernelRuntime& runtime, MemoryStore* store,
                                            const std::vector<DecodeInputs>& inputs);

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_ATTENTION_BASELINE_H_
