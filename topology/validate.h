// Validate(): rejects a chip config that the simulator cannot model, before any unit is built
// (STYLE 6). Loaded topologies always pass through it (topology/loader.h).
//
// Contract: returns OkStatus or InvalidArgument with ONE line that names the full field path
// and the reason, e.g. `sip.cube.hbm_channel.bytes_per_cycle must be > 0 (got 0)`. Checks run
// top-down (chip, SIP, CUBE, units) and the first broken rule is reported; a sub-message's own
// fields are checked before the rules that relate it to other messages, so a zero is reported
// as a zero rather than as a mismatch.
//
// Rules (every message is required; a missing one is reported as `<path> is missing`):
//   chip      name non-empty; sips > 0; sip and ucie present (ucie is checked even with one SIP).
//   clocks    every clock_mhz > 0 and divides 1'000'000: the time base is integer picoseconds,
//             so one cycle must be a whole number of ps.
//   links     (ipcq.link, noc.link, ucie.link) bytes_per_cycle > 0, latency_cycles > 0.
//   sip       cubes > 0; cube_mesh rows, cols > 0; cubes == rows * cols (no holes, no overflow).
//   noc       packet_bytes > 0; credits_per_link > 0; endpoint_queue_bytes > 0 and
//             >= packet_bytes (the endpoint holds at least one packet).
//   cube      pes > 0; pe_mesh rows, cols > 0 and pes == rows * cols; hbm_pseudo_channels > 0
//             and == pes * pe.hbm_channels (P must match the channel split); hbm_bytes > 0 and a
//             multiple of hbm_pseudo_channels * hbm_channel.interleave_bytes (every channel
//             holds the same whole number of interleave blocks).
//   hbm       bytes_per_cycle, first_byte_latency_cycles, interleave_bytes > 0.
//   pe        hbm_channels > 0.
//   gemm      array_rows, array_cols > 0; fill_drain_cycles may be 0.
//   math      lanes_per_cycle, transcendental_per_cycle > 0; reduction_extra_cycles and
//             startup_cycles may be 0.
//   dma       chunk_bytes > 0, a power of two, and divides hbm_channel.interleave_bytes (a chunk
//             never straddles two channels); remote_channel_extra_cycles may be 0.
//   tcm       total_bytes > 0; scratch_bytes > 0 and <= total_bytes (the persistent arena is
//             total - scratch and may be empty).
//   scheduler tile_m, tile_k, tile_n > 0; max_inflight_composites > 0.
//   issue     at least one issue_cost_profiles entry; names non-empty and unique;
//             default_issue_cost_profile names one of them. Costs may be 0.
//   ipcq      queue_bytes > 0; chunk_bytes > 0 and <= queue_bytes (else a chunk never fits).
//   ucie      port_cube present and inside sip.cube_mesh.
//
// Limits — what the tool can simulate, checked before any unit (or the unit index) is built;
// counts are multiplied without overflow (128-bit):
//   units     sips * (1 + sip.cubes * (1 + sip.cube.pes * 9 + sip.cube.hbm_pseudo_channels))
//             (topology/ids.h: UCIe port, NOC router, HBM channels, and per PE its CPU,
//             scheduler, DMA, GEMM, MATH and four IPCQ queues) <= 2^20 = 1048576: 120 times
//             chip_4sip's 8772 units. Measured on chip_4sip with every CUBE simulated (`ahbm
//             stream`), a unit costs ~2 KiB of host memory, so the limit keeps a whole-chip run
//             near 2 GiB (the unit index alone ~130 MB; sips: 1000000 grew past 20 GB).
//   hbm       sips * sip.cubes * sip.cube.hbm_bytes < 2^64 (byte counts are 64-bit).
//   bank      stack_ids * bank_groups * banks_per_group <= 1024 banks per channel (HBM3: 64)
//             and queue_depth <= 1024 (each channel keeps a state per bank and queue entry).
#ifndef AHBM_TOPOLOGY_VALIDATE_H_
#define AHBM_TOPOLOGY_VALIDATE_H_

#include "absl/status/status.h"
#include "proto/topology.pb.h"

namespace ahbm::topology {

[[nodiscard]] absl::Status Validate(const pb::Chip& chip);

}  // namespace ahbm::topology

#endif  // AHBM_TOPOLOGY_VALIDATE_H_
