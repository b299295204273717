#include "actors/models/gemm_model.h"

#include <algorithm>

#include "base/check.h"

namespace ahbm::sim {
namespace {

uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace

Cycles GemmTileCycles(const pb::GemmEngine& config, const GemmTileShape& tile) {
  AHBM_CHECK(config.array_rows() > 0 && config.array_cols() > 0)
      << "GEMM array " << config.array_rows() << "x" << config.array_cols();
  AHBM_CHECK(tile.m > 0 && tile.k > 0 && tile.n > 0)
      << "empty GEMM tile m=" << tile.m << " k=" << tile.k << " n=" << tile.n;
  return Cycles(tile.k * CeilDiv(tile.m, config.array_rows()) *
                CeilDiv(tile.n, config.array_cols()));
}

uint64_t GemmTileFlops(const GemmTileShape& tile) { return 2 * tile.m * tile.k * tile.n; }

GemmEngineModel::GemmEngineModel(const pb::GemmEngine& config, ClockDomain clock)
    : config_(config), clock_(clock) {
  AHBM_CHECK(config_.array_rows() > 0 && config_.array_cols() > 0)
      << "GEMM array " << config_.array_rows() << "x" << config_.array_cols();
}

GemmService GemmEngineModel::Preview(SimTime ready, const GemmTileShape& tile) const {
  GemmService service;
  service.start = clock_.NextEdge(std::max(ready, free_at_));
  // Idle before the very first tile, and whenever the array stood still for any time at all.
  service.paid_fill_drain = stats_.tiles == 0 || service.start > free_at_;
  Cycles cycles = GemmTileCycles(config_, tile);
  if (service.paid_fill_drain) cycles += Cycles(config_.fill_drain_cycles());
  service.end = service.start + clock_.ToTime(cycles);
  return service;
}

GemmService GemmEngineModel::Serve(SimTime ready, const GemmTileShape& tile) {
  GemmService service = Preview(ready, tile);
  free_at_ = service.end;
  stats_.busy_ps += service.end - service.start;
  stats_.flops += GemmTileFlops(tile);
  ++stats_.tiles;
  if (service.paid_fill_drain) ++stats_.fill_drains;
  return service;
}

}  // namespace ahbm::sim
