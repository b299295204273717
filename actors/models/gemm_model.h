// The GEMM engine's timing model: a bf16 MAC array with fp32 accumulation (DESIGN §2).
// Plain C++ (no CAF), driven by the GEMM engine actor and by PE_SCHEDULER's closed-form
// pipeline (STYLE 4).
//
// Config: pb::GemmEngine (`array_rows` x `array_cols` MACs, `fill_drain_cycles`), clocked by the
// PE clock (pb::Pe.clock_mhz).
//
// Contract:
// - A tile (m, k, n) takes GemmTileCycles = k * ceil(m / array_rows) * ceil(n / array_cols)
//   cycles of compute. A partially filled array costs as much as a full one (padding loss).
// - Fill/drain: a tile that starts while the engine is idle pays fill_drain_cycles on top. The
//   engine is idle before its very first tile and whenever a tile starts later than the previous
//   tile's end; a tile starting exactly at the previous tile's end pays nothing (back-to-back).
// - Serve(ready, tile): start = the first PE clock edge at or after max(ready, free_at);
//   end = start + (compute [+ fill_drain]) cycles; free_at becomes end. Tiles are served in call
//   order (the caller — PE_SCHEDULER — owns arbitration); `ready` earlier than a previous call's
//   `ready` is allowed and simply queues behind it.
// - Preview(ready, tile) returns what Serve would return and changes nothing (for the
//   scheduler's closed-form pipeline and re-planning).
// - m, k, n must be > 0 and the config must have passed topology Validate(): violations are our
//   bugs and fail an AHBM_CHECK.
//
// Stats (GemmEngineStats):
//   busy_ps      SimTime  time the array was occupied, fill/drain included
//   flops        uint64   useful FLOPs, 2*m*k*n per tile (padding not counted)
//   tiles        uint64   tiles served
//   fill_drains  uint64   tiles that paid fill_drain_cycles
#ifndef AHBMSIM_ACTORS_MODELS_GEMM_MODEL_H_
#define AHBMSIM_ACTORS_MODELS_GEMM_MODEL_H_

#include <cstdint>

#include "actors/time.h"
#include "proto/topology.pb.h"

namespace ahbm::sim {

// The extents, in elements, of one GEMM tile: out[m, n] += a[m, k] * b[k, n].
struct GemmTileShape {
  uint64_t m = 0;
  uint64_t k = 0;
  uint64_t n = 0;

  friend bool operator==(const GemmTileShape&, const GemmTileShape&) = default;
};

// k * ceil(m / array_rows) * ceil(n / array_cols): compute cycles, fill/drain excluded.
Cycles GemmTileCycles(const pb::GemmEngine& config, const GemmTileShape& tile);

// Useful FLOPs of a tile: 2 * m * k * n (one multiply and one add per MAC).
uint64_t GemmTileFlops(const GemmTileShape& tile);

// When one tile occupies the engine.
struct GemmService {
  SimTime start;
  SimTime end;
  bool paid_fill_drain = false;

  friend bool operator==(const GemmService&, const GemmService&) = default;
};

struct GemmEngineStats {
  SimTime busy_ps;           // array occupied, fill/drain included
  uint64_t flops = 0;        // useful FLOPs, 2*m*k*n per tile
  uint64_t tiles = 0;        // tiles served
  uint64_t fill_drains = 0;  // tiles that paid fill_drain_cycles

  friend bool operator==(const GemmEngineStats&, const GemmEngineStats&) = default;
};

// One PE's GEMM engine: serves tiles one at a time, in call order.
class GemmEngineModel {
 public:
  GemmEngineModel(const pb::GemmEngine& config, ClockDomain clock);

  // What Serve(ready, tile) would return; no state changes.
  GemmService Preview(SimTime ready, const GemmTileShape& tile) const;
  // Occupies the engine with `tile`, which may start no earlier than `ready`.
  GemmService Serve(SimTime ready, const GemmTileShape& tile);

  // The end of the last tile served (time 0 before the first).
  SimTime free_at() const { return free_at_; }
  const GemmEngineStats& stats() const { return stats_; }
  const pb::GemmEngine& config() const { return config_; }
  const ClockDomain& clock() const { return clock_; }

 private:
  pb::GemmEngine config_;
  ClockDomain clock_;
  SimTime free_at_;
  GemmEngineStats stats_;
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_MODELS_GEMM_MODEL_H_
