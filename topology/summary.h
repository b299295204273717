// TopologySummary(): a one-screen, human-readable description of a chip — shape, unit counts,
// peak HBM bandwidth and bf16 FLOP/s at every level, TCM, links and issue-cost profiles. For
// `ahbm` output and reports; never parse it (machine-readable data lives in protos).
//
// Contract: expects a chip that passed Validate(). Peaks are computed from the config:
//   HBM per PE   = pe.hbm_channels * hbm_channel.bytes_per_cycle * hbm_channel.clock_mhz
//   HBM per CUBE = cube.hbm_pseudo_channels * bytes_per_cycle * clock_mhz
//   bf16 per PE  = 2 * gemm.array_rows * gemm.array_cols * pe.clock_mhz  (a MAC is 2 FLOP)
// then times PEs per CUBE, CUBEs per SIP and SIPs. GB/s and TFLOP/s are decimal (1e9, 1e12),
// printed with up to 3 decimals and trailing zeros dropped ("256 GB/s", "2.048 TFLOP/s");
// sizes are binary (KiB, MiB, GiB).
#ifndef AHBM_TOPOLOGY_SUMMARY_H_
#define AHBM_TOPOLOGY_SUMMARY_H_

#include <string>

#include "proto/topology.pb.h"

namespace ahbm::topology {

std::string TopologySummary(const pb::Chip& chip);

}  // namespace ahbm::topology

#endif  // AHBM_TOPOLOGY_SUMMARY_H_
