// Contiguous-block KV placement over the C x P ranks of a CUBE Group, with rotation
// (ADR rev2 §2.1-2.2, P5).
//
// Contract:
//   R = C * P ranks; B = ceil(max_context / R) slots per rank;
//   cube_local = (cube_in_group - start_cube) mod C, pe_local = (pe - start_pe) mod P,
//   rank = cube_local * P + pe_local; rank r owns global positions [r*B, (r+1)*B);
//   global position = rank * B + slot; the owner of token t is rank floor(t / B), slot t mod B;
//   with `counter` filled tokens, my_len(r) = clamp(counter - r*B, 0, B).
// Rotation values may exceed C or P: they are taken mod C and mod P as the ADR writes them.
#ifndef AHBM_TOPOLOGY_KV_PLACEMENT_H_
#define AHBM_TOPOLOGY_KV_PLACEMENT_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace ahbm::topology {

class KvPlacement {
 public:
  // Errors name the workload field: c, p, max_context.
  static absl::StatusOr<KvPlacement> Create(uint32_t c, uint32_t p, uint64_t max_context,
                                            uint32_t start_cube, uint32_t start_pe);

  uint32_t c() const { return c_; }
  uint32_t p() const { return p_; }
  uint32_t ranks() const { return c_ * p_; }
  uint64_t max_context() const { return max_context_; }
  uint64_t block() const { return block_; }  // B
  uint32_t start_cube() const { return start_cube_; }
  uint32_t start_pe() const { return start_pe_; }

  uint32_t CubeLocal(uint32_t cube_in_group) const;
  uint32_t PeLocal(uint32_t pe) const;
  uint32_t Rank(uint32_t cube_in_group, uint32_t pe) const;
  // Inverse of Rank: where rank r physically sits.
  uint32_t CubeInGroupOfRank(uint32_t rank) const;
  uint32_t PeOfRank(uint32_t rank) const;

  uint64_t GlobalPosition(uint32_t rank, uint64_t slot) const;
  struct Owner {
    uint32_t rank = 0;
    uint64_t slot = 0;
  };
  // `t` must be < ranks() * block().
  Owner OwnerOf(uint64_t t) const;
  // Valid tokens of rank r when `counter` tokens are filled (counter <= max_context).
  uint64_t MyLen(uint32_t rank, uint64_t counter) const;

 private:
  KvPlacement(uint32_t c, uint32_t p, uint64_t max_context, uint32_t start_cube,
              uint32_t start_pe);

  uint32_t c_;
  uint32_t p_;
  uint64_t max_context_;
  uint64_t block_;
  uint32_t start_cube_;  // already reduced mod c
  uint32_t start_pe_;    // already reduced mod p
};

}  // namespace ahbm::topology

#endif  // AHBM_TOPOLOGY_KV_PLACEMENT_H_
