// The kernel runtime's view of messages on one PE (DESIGN §4; the rules are in runtime.h's
// contract): what has arrived on each incoming channel, the receives posted on it, and the
// IPCQ demultiplexing staging. Plain records; PeRuntime's messaging part
// (messaging.cc) moves them.
#ifndef AHBMSIM_KERNELS_RUNTIME_MESSAGING_H_
#define AHBMSIM_KERNELS_RUNTIME_MESSAGING_H_

#include <cstdint>
#include <deque>
#include <string>

#include "actors/engine.h"
#include "actors/time.h"
#include "base/check.h"
#include "kernels/runtime/tensor.h"

namespace ahbm::kernels {

class Instance;

// Per-PE TCM for IPCQ messages popped ahead of their instance's receive (runtime.h).
// 64 KiB holds the reduce's (m, l, O) messages (a few KiB each) of several requests.
inline constexpr uint64_t kDemuxStagingBytes = 64 * 1024;

// Channel keys: IPCQ queues (this bit | the sender's queue unit) above every NOC source PE.
inline constexpr uint64_t kIpcqChannel = uint64_t{1} << 32;

// A message's id: drawn by its sending PE alone, (pe + 1) * kMessageIdsPerPe + its n-th send
// (n from 1), so it reads as "PE pe's n-th message" and does not depend on the order other
// PEs' handlers run in (an island run labels messages as a single heap does).
inline constexpr uint64_t kMessageIdsPerPe = 1'000'000'000;
inline uint64_t MessageId(uint32_t pe, uint64_t n) {
  AHBM_CHECK(n > 0 && n < kMessageIdsPerPe) << "pe " << pe << " sent message " << n;
  return (uint64_t{pe} + 1) * kMessageIdsPerPe + n;
}

// A (request, stream) as the NOC endpoint's flow (sim::NocEndpointModel).
inline uint64_t NocFlow(uint32_t request_id, uint32_t stream) {
  return uint64_t{request_id} << 32 | stream;
}

struct IncomingMessage {
  uint64_t message_id = 0;
  uint32_t src_pe = 0;
  uint32_t request_id = 0;   // the sender's (request, stream): only its receives take it
  uint32_t stream = 0;
  uint64_t bytes = 0;        // the whole message
  uint64_t elements = 0;     // of the sender's payload
  uint32_t chunks = 0;
  uint32_t arrived = 0;
  uint64_t arrived_bytes = 0;
  uint64_t popped_bytes = 0;  // pops issued (IPCQ)
  bool complete = false;     // every chunk arrived (IPCQ) / delivered (NOC)
  sim::SimTime last_arrival;
  sim::UnitId queue = 0;     // IPCQ: the sender's queue unit (pops go there)
  bool staging = false;      // IPCQ: being popped into the staging buffer (bytes reserved)
  sim::SimTime stage_from;   // the post of the receive that made it stage
  uint32_t stage_for = 0;    // that receive's request
  sim::SimTime first_pop, last_pop;
  std::string values;        // data mode: the sender's values (IPCQ chunk 0's, the NocDelivered's)
};

struct PostedRecv {
  uint64_t handle = 0;
  Instance* inst = nullptr;
  sim::SimTime posted;       // cpu time of the post
  Tensor dst;
  uint64_t call = 0;         // while recording: the receive's call index + 1
};

// One incoming channel: an IPCQ queue from a neighbour, or NOC messages from one PE.
struct Channel {
  std::deque<IncomingMessage> messages;  // IPCQ: the queue, head first; NOC: delivered
  std::deque<IncomingMessage> staged;    // IPCQ: popped into staging, oldest first
  std::deque<PostedRecv> recvs;          // not yet matched, in post order
  sim::SimTime last_pop;                 // IPCQ: pops never go back in time
};

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_RUNTIME_MESSAGING_H_
