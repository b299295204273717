// The K cache layouts of the ADR kernels (DESIGN §4b; ADR-0060 rev2 §B-2, §11 item 2): how a
// rank's K block of B keys sits in HBM and how a kernel gets KV tile j's (d, len) Q·Kᵀ operand
// from it. Shared by the decode (decode.cc) and prefill (prefill.cc) kernels and their launchers.
//
// Contract:
// - kTileMajor (the default): [ceil(B / TILE)][d][TILE]; tile j's operand is the contiguous
//   [d, TILE] at tile j (a ragged last tile: its first len columns, strided).
// - kTransposed (the ADR's own layout, K pre-transposed): [d, B]; tile j's operand is columns
//   [j·TILE, j·TILE + len) of it — a strided read of d rows of len·2 bytes, each paying every
//   256 B DMA chunk it touches (the chunk waste of the DMA statistics).
// - kRowMajor (K stored like V): [B, d]; tile j is loaded as rows [j·TILE, j·TILE + len) and
//   transposed to [d, len] by a blocking tl.Transpose on the MATH engine (the ADR's candidate
//   `tl.transpose`, §3), before its Q·Kᵀ composite reads it from TCM. The load lives in a
//   scratch scope of its own (the transpose has read it when the call returns); the transposed
//   tile goes to a buffer the caller owns (it must outlive the composite).
// - Host placement (host::PlaceKvCache) writes the same layouts: HostKvLayout.
#ifndef AHBMSIM_KERNELS_ATTENTION_K_LAYOUT_H_
#define AHBMSIM_KERNELS_ATTENTION_K_LAYOUT_H_

#include <cstdint>
#include <optional>

#include "kernels/host/placement.h"
#include "kernels/runtime/task.h"
#include "kernels/runtime/tl.h"

namespace ahbm::kernels {

enum class KLayout : uint8_t { kTileMajor, kTransposed, kRowMajor };

// "TILE_MAJOR", "TRANSPOSED", "ROW_MAJOR" (the workload's names).
const char* KLayoutName(KLayout layout);

// How host::PlaceKvCache lays a rank's K block of `block` slots out: tile-major with `tile`
// slots per tile; transposed is tile-major with one tile of the whole block ([1, d, B]).
host::KvLayout HostKvLayout(KLayout layout, uint64_t tile, uint64_t block);

// Bytes of a K block of `block` keys (bf16): tile-major pads the last tile to TILE keys.
uint64_t KBlockBytes(KLayout layout, uint64_t d, uint64_t tile, uint64_t block);

// Where a rank's K block is: its HBM address and owner, d, TILE and the block's capacity B.
struct KBlock {
  KLayout layout = KLayout::kTileMajor;
  uint64_t addr = 0;
  std::optional<uint32_t> owner;  // the PE whose HBM holds it (default: the caller's)
  uint64_t d = 0;
  uint64_t tile = 0;
  uint64_t block = 0;  // B (keys of the block's capacity; the row length of [d, B])
};

// Tile j (len keys) as it is read from HBM: the (d, len) operand (tile-major, transposed), or
// the [len, d] rows (row-major).
Tensor KTileInHbm(const Tl& tl, const KBlock& k, uint64_t j, uint64_t len);

// Tile j's (d, len) Q·Kᵀ operand: KTileInHbm, except row-major, where the rows are loaded and
// transposed into the dense [d, len] prefix of `buf` (a TCM buffer of at least d·TILE bf16
// elements, dense) — blocking; `scope`: the load in a scratch scope of its own.
Task<Tensor> KOperand(Tl& tl, KBlock k, uint64_t j, uint64_t len, Tensor buf, bool scope);

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_ATTENTION_K_LAYOUT_H_
