#include "topology/kv_placement.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/check.h"

namespace ahbm::topology {

absl::StatusOr<KvPlacement> KvPlacement::Create(uint32_t c, uint32_t p, uint64_t max_context,
                                                uint32_t start_cube, uint32_t start_pe) {
  if (c == 0) return absl::InvalidArgumentError("c must be > 0 (got 0)");
  if (p == 0) return absl::InvalidArgumentError("p must be > 0 (got 0)");
  if (max_context == 0) return absl::InvalidArgumentError("max_context must be > 0 (got 0)");
  return KvPlacement(c, p, max_context, start_cube, start_pe);
}

KvPlacement::KvPlacement(uint32_t c, uint32_t p, uint64_t max_context, uint32_t start_cube,
                         uint32_t start_pe)
    : c_(c),
      p_(p),
      max_context_(max_context),
      block_((max_context + uint64_t{c} * p - 1) / (uint64_t{c} * p)),
      start_cube_(start_cube % c),
      start_pe_(start_pe % p) {}

uint32_t KvPlacement::CubeLocal(uint32_t cube_in_group) const {
  AHBM_CHECK(cube_in_group < c_) << "cube_in_group " << cube_in_group << " >= C=" << c_;
  return (cube_in_group + c_ - start_cube_) % c_;
}

uint32_t KvPlacement::PeLocal(uint32_t pe) const {
  AHBM_CHECK(pe < p_) << "pe " << pe << " >= P=" << p_;
  return (pe + p_ - start_pe_) % p_;
}

uint32_t KvPlacement::Rank(uint32_t cube_in_group, uint32_t pe) const {
  return CubeLocal(cube_in_group) * p_ + PeLocal(pe);
}

uint32_t KvPlacement::CubeInGroupOfRank(uint32_t rank) const {
  AHBM_CHECK(rank < ranks()) << "rank " << rank;
  return (rank / p_ + start_cube_) % c_;
}

uint32_t KvPlacement::PeOfRank(uint32_t rank) const {
  AHBM_CHECK(rank < ranks()) << "rank " << rank;
  return (rank % p_ + start_pe_) % p_;
}

uint64_t KvPlacement::GlobalPosition(uint32_t rank, uint64_t slot) const {
  AHBM_CHECK(rank < ranks() && slot < block_) << "rank " << rank << " slot " << slot;
  return uint64_t{rank} * block_ + slot;
}

KvPlacement::Owner KvPlacement::OwnerOf(uint64_t t) const {
  AHBM_CHECK(t < uint64_t{ranks()} * block_) << "token " << t << " beyond the KV cache";
  return Owner{static_cast<uint32_t>(t / block_), t % block_};
}

uint64_t KvPlacement::MyLen(uint32_t rank, uint64_t counter) const {
  AHBM_CHECK(rank < ranks()) << "rank " << rank;
  AHBM_CHECK(counter <= max_context_) << "counter " << counter << " > max_context";
  const uint64_t first = uint64_t{rank} * block_;
  if (counter <= first) return 0;
  return std::min(counter - first, block_);
}

}  // namespace ahbm::topology
