// ADR-0063 scratch_scope: an RAII guard over an instance's scratch arena (DESIGN §4). On
// leaving, the arena returns to where it was; leaving while a command still writes into the
// released part is an error naming that command (the kernel's next call throws it).
#ifndef AHBMSIM_KERNELS_RUNTIME_SCRATCH_SCOPE_H_
#define AHBMSIM_KERNELS_RUNTIME_SCRATCH_SCOPE_H_

#include <cstdint>

namespace ahbm::kernels {

class Tl;

class ScratchScope {
 public:
  explicit ScratchScope(Tl* tl);
  ~ScratchScope();
  ScratchScope(const ScratchScope&) = delete;
  ScratchScope& operator=(const ScratchScope&) = delete;

 private:
  Tl* tl_;
  uint64_t mark_;
};

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_RUNTIME_SCRATCH_SCOPE_H_
