#include "kernels/runtime/scratch_scope.h"

#include "kernels/runtime/pe_runtime.h"
#include "kernels/runtime/tl.h"

namespace ahbm::kernels {

ScratchScope::ScratchScope(Tl* tl) : tl_(tl), mark_(tl->runtime()->EnterScope(*tl->instance())) {}

ScratchScope::~ScratchScope() { tl_->runtime()->LeaveScope(*tl_->instance(), mark_); }

}  // namespace ahbm::kernels
