// The pre-ADR prefill baseline (`--variant=baseline_fanout`; ADR-0060 rev2 §A "prefill (Ring
// K/V)"; DESIGN §4b "baselines"): for comparison, never the default. Per-rank partial attention
// with blocking `dot`s, a bidirectional K/V fan-out, the online-softmax fold; no causal skip, no
// GQA reuse. Placement as the decode `baseline_fanout` (baseline.h):
// - Query head hq of request u runs on global CUBE `sip·cubes_per_sip + hq` (BaselineCubes),
//   its KV head h = hq / G copied there (K/V placed and read once per query head). The CUBE's P
//   PEs are the ranks: topology::KvPlacement with C = 1, rotated by request (start_pe + u): rank
//   r holds KV block r (B = ⌈max_context / P⌉ keys, K tile-major [⌈B/tile⌉][d][tile], V [B, d])
//   and query rows [r·Qb, (r+1)·Qb) of the head, Qb = ⌈T_q / P⌉ (query t at global position
//   S − T_q + t), in query tiles of q_tile rows, Q and O [rows, d] bf16 in its HBM.
// - The ring is the snake cycle over the CUBE's PE rectangle (FanoutRing; one IPCQ hop a link).
//   With a = ⌈(P − 1) / 2⌉ and b = ⌊(P − 1) / 2⌋: rank at ring position i receives from its
//   predecessor the blocks of positions i − 1 .. i − a (rounds 1 .. a) and from its successor
//   those of i + 1 .. i + b; in round k it forwards what it received in round k − 1 (round 1:
//   its own block) onward in each direction, so after a rounds it has seen all P − 1 other
//   blocks. The fan-out is pipelined by KV tile: for KV tile index j, every rank runs the a
//   rounds of tile j of every block (long blocks never sit whole in TCM), then j + 1.
// - Messages: a K tile (d rows of len keys) and a V tile (len rows), each cut into messages of
//   at most `message_bytes` by rows (MessageChunks). Receives are posted before sends: round 1's
//   before the own tile's sends, round k + 1's before round k's forwards (so a message larger
//   than the queue streams through and no ring waits on itself).
// - Fold: every (query tile, KV tile) pair of every block — no causal skip — with blocking dots
//   and MATH primitives (FoldTileBlocking); a pair with a key after a query adds a causal mask
//   (bf16, 0 / −inf, in the rank's HBM, one per distinct (offset, tokens, len); a wholly future
//   pair uses the all −inf mask of offset = tokens), so a wholly future tile still costs its dots.
// - T_q chunking: when a rank's query tiles' Q and running states outgrow its share of the
//   persistent arena, the fan-out runs once per chunk (every rank of the CUBE runs as many).
// - TCM per instance: persistent own K/V tile, two K/V tile buffers per direction (ping-pong),
//   a mask buffer, the chunk's Q and states; scratch: one fold's temporaries (a scope each).
#ifndef AHBMSIM_KERNELS_ATTENTION_PREFILL_BASELINE_H_
#define AHBMSIM_KERNELS_ATTENTION_PREFILL_BASELINE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/attention/decode_launch.h"
#include "kernels/attention/prefill.h"
#include "kernels/attention/prefill_launch.h"
#include "kernels/attention/qkv_inputs.h"
#include "kernels/memory/memory_store.h"
#include "kernels/runtime/runtime.h"
#include "kernels/runtime/task.h"
#include "kernels/runtime/tl.h"
#include "proto/topology.pb.h"

namespace ahbm::kernels {

// A KV block as the fan-out carries it: global position of its first key, its keys.
struct FanoutBlock {
  uint64_t pos = 0;
  uint64_t len = 0;
};

// One rank of one query head of one request.
struct FanoutPrefillPlan {
  uint32_t d = 128;
  uint32_t tile = 128;     // keys per KV tile
  uint32_t q_tile = 128;   // rows per query tile (one query head: rows = tokens)
  float scale = 0;
  uint64_t message_bytes = 256 << 10;
  FanoutBlock own;
  uint64_t own_k_addr = 0, own_v_addr = 0;  // this PE's HBM
  std::vector<FanoutBlock> from_prev;  // round k = 1 .. a: the block k ring positions behind
  std::vector<FanoutBlock> from_next;  // round k = 1 .. b: the block k positions ahead
  Peer next = Peer::Ipcq(topology::Dir::kEast);
  Peer prev = Peer::Ipcq(topology::Dir::kWest);
  std::vector<QueryTile> tiles;  // contiguous rows, Q and O back to back in this PE's HBM
  uint32_t tiles_per_chunk = 1;  // query tiles per fan-out pass
  uint32_t chunks = 1;           // fan-out passes (the same on every rank of the CUBE)
  std::vector<MaskSlot> masks;   // sorted by Key()
};

Task<void> FanoutPrefillRank(Tl& tl, FanoutPrefillPlan plan);

// Called by LaunchPrefill for kBaselineFanout (cfg validated, `geo` = MakeAttentionGeometry of
// cfg.Geometry(), C = 1; `store` null in timing mode). Outputs: one per query
// tile (g = 1, head hq); composites = grid_composites = the blocking dots.
absl::StatusOr<PrefillLaunch> LaunchPrefillFanout(const pb::Chip& chip, const PrefillConfig& cfg,
                                                  const AttentionGeometry& geo,
                                                  KernelRuntime& runtime, MemoryStore* store,
                                                  const std::vector<QkvInputs>& inputs);

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_ATTENTION_PREFILL_BASELINE_H_
