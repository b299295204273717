#include "kernels/attention/k_layout.h"

#include <vector>

namespace ahbm::kernels {

const char* KLayoutName(KLayout layout) {
  switch (layout) {
    case KLayout::kTileMajor:
      return "TILE_MAJOR";
    case KLayout::kTransposed:
      return "TRANSPOSED";
    case KLayout::kRowMajor:
      break;
  }
  return "ROW_MAJOR";
}

host::KvLayout HostKvLayout(KLayout layout, uint64_t tile, uint64_t block) {
  switch (layout) {
    case KLayout::kTileMajor:
      return host::KvLayout{host::SlotLayout::kTileMajor, tile};
    case KLayout::kTransposed:
      return host::KvLayout{host::SlotLayout::kTileMajor, block};
    case KLayout::kRowMajor:
      break;
  }
  return host::KvLayout{host::SlotLayout::kRowMajor, 0};
}

uint64_t KBlockBytes(KLayout layout, uint64_t d, uint64_t tile, uint64_t block) {
  const uint64_t keys = layout == KLayout::kTileMajor ? (block + tile - 1) / tile * tile : block;
  return keys * d * 2;
}

Tensor KTileInHbm(const Tl& tl, const KBlock& k, uint64_t j, uint64_t len) {
  switch (k.layout) {
    case KLayout::kTileMajor: {
      const std::vector<uint64_t> shape = {k.d, k.tile};
      return tl.Ref(k.addr + j * k.d * k.tile * 2, shape, pb::BF16, k.owner).Cols(0, len);
    }
    case KLayout::kTransposed: {
      const std::vector<uint64_t> shape = {k.d, k.block};
      return tl.Ref(k.addr, shape, pb::BF16, k.owner).Cols(j * k.tile, len);
    }
    case KLayout::kRowMajor:
      break;
  }
  const std::vector<uint64_t> shape = {len, k.d};
  return tl.Ref(k.addr + j * k.tile * k.d * 2, shape, pb::BF16, k.owner);
}

Task<Tensor> KOperand(Tl& tl, KBlock k, uint64_t j, uint64_t len, Tensor buf, bool scope) {
  if (k.layout != KLayout::kRowMajor) co_return KTileInHbm(tl, k, j, len);
  const std::vector<uint64_t> shape = {k.d, len};
  const Tensor kt = buf.Rows(0, k.d * len).View(shape);
  std::optional<ScratchScope> load_scope;
  if (scope) load_scope.emplace(&tl);
  Tensor rows = co_await tl.Load(KTileInHbm(tl, k, j, len));
  co_return co_await tl.Transpose(rows, kt);  // auto-waits on the load; blocking
}

}  // namespace ahbm::kernels
