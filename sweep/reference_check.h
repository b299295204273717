// A data-mode run's outputs against the float64 reference attention (tests/attention_reference.h:
// written from the definition, sharing no code with the kernels). Used by the milestone's
// numerical checks (milestone/numerics.h) through jobs with JobOptions.reference_check, so the
// comparison runs where the job runs (a forked child, a remote worker) and only the figures
// travel.
#ifndef AHBMSIM_SWEEP_REFERENCE_CHECK_H_
#define AHBMSIM_SWEEP_REFERENCE_CHECK_H_

#include <map>
#include <string>

#include "kernels/host/npy.h"

namespace ahbm::sweep {

// One data-mode output set against the reference.
struct OutputError {
  double max_abs_error = 0;  // infinite: NaN / Inf, missing output, size mismatch
  // kAttentionTolerance x max(1, max |V|) (the largest over the requests)
  double tolerance = 0;
  std::string note;          // what was wrong besides the size of the error ("" if nothing)
  bool ok() const;
};

// `inputs` and `outputs` as LaunchResult holds them: output o<suffix> against the reference on
// q<suffix>, k<suffix>, v<suffix>.
OutputError CompareWithReference(const std::map<std::string, host::NpyArray>& inputs,
                                 const std::map<std::string, host::NpyArray>& outputs);

}  // namespace ahbm::sweep

#endif  // AHBMSIM_SWEEP_REFERENCE_CHECK_H_
