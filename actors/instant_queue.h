// The events of the instant being delivered, per island, in (source, sequence) order without a
// heap (engine.h): zero-delay sends — a DMA's channel requests and their answers, completions,
// engine work — are most of a full-chip run's events, and many are pending at one instant.
//
// Contract:
// - InstantStore<E> keeps, for every source id below kMaxSources, one FIFO of E (nodes in one
//   shared vector, linked by index); an InstantSet (one per island) marks in a three-level
//   bitmap the sources whose FIFO holds its events. A source's events belong to one set at a
//   time (an island's events never go to another island: the engine CHECKs it).
// - Push(set, src, time) appends an E for `src` and returns it for the caller to fill (its
//   contents unspecified); the reference is valid until the next Push. A set holds events of
//   one time: pushing another time into a non-empty set fails a CHECK.
// - Min(set) / Pop(set): the event of the smallest source, the oldest of its FIFO. Pushed in
//   the order of their sequence numbers (a source numbers its sends as it makes them), a
//   source's events leave in sequence order, so the order is (src, seq): the order of the
//   engine's key among events of one time.
#ifndef AHBMSIM_ACTORS_INSTANT_QUEUE_H_
#define AHBMSIM_ACTORS_INSTANT_QUEUE_H_

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "base/check.h"

namespace ahbm::sim {

// One island's share of the store: which sources have events, and how many.
class InstantSet {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

 private:
  template <class E>
  friend class InstantStore;
  uint64_t top_ = 0;            // bit m: mid_[m] != 0
  std::vector<uint64_t> mid_;   // bit l of word m: leaf_[64 m + l] != 0
  std::vector<uint64_t> leaf_;  // bit b of word w: source 64 w + b has events here
  size_t size_ = 0;
  uint64_t time_ = 0;           // the time of every event here (while not empty)
};

template <class E>
class InstantStore {
 public:
  static constexpr uint32_t kMaxSources = 1u << 18;  // 64 * 64 * 64 bits

  E& Push(InstantSet& set, uint32_t src, uint64_t time) {
    AHBM_CHECK(src < kMaxSources) << "instant event from source " << src;
    AHBM_CHECK(set.size_ == 0 || set.time_ == time)
        << "an instant set holds events of time " << set.time_ << ", pushed " << time;
    set.time_ = time;
    if (src >= head_.size()) [[unlikely]] {
      const size_t size =
          std::min<size_t>(kMaxSources, std::max<size_t>(src + 1, 2 * head_.size()));
      head_.resize(size, kNil);
      tail_.resize(size, kNil);
    }
    uint32_t node = free_;
    if (node != kNil) {
      free_ = nodes_[node].next;
    } else {
      node = static_cast<uint32_t>(nodes_.size());
      nodes_.emplace_back();
    }
    nodes_[node].next = kNil;
    if (head_[src] == kNil) {
      head_[src] = node;
      const uint32_t w = src >> 6;
      const uint32_t m = src >> 12;
      if (w >= set.leaf_.size()) [[unlikely]] {
        set.leaf_.resize(w + 1, 0);
        set.mid_.resize(m + 1, 0);
      }
      set.leaf_[w] |= uint64_t{1} << (src & 63);
      set.mid_[m] |= uint64_t{1} << (w & 63);
      set.top_ |= uint64_t{1} << m;
    } else {
      nodes_[tail_[src]].next = node;
    }
    tail_[src] = node;
    ++set.size_;
    return nodes_[node].value;
  }

  // The source whose event Min / Pop give (the set must not be empty).
  static uint32_t MinSource(const InstantSet& set) {
    const uint32_t m = static_cast<uint32_t>(std::countr_zero(set.top_));
    const uint32_t w = (m << 6) | static_cast<uint32_t>(std::countr_zero(set.mid_[m]));
    return (w << 6) | static_cast<uint32_t>(std::countr_zero(set.leaf_[w]));
  }
  // The oldest event of `src` (MinSource(set) for the set's next event).
  const E& Oldest(uint32_t src) const { return nodes_[head_[src]].value; }
  // The set must not be empty.
  const E& Min(const InstantSet& set) const { return Oldest(MinSource(set)); }

  // Takes the oldest event of `src`, MinSource(set).
  E PopFrom(InstantSet& set, uint32_t src) {
    const uint32_t node = head_[src];
    const E value = nodes_[node].value;
    head_[src] = nodes_[node].next;
    nodes_[node].next = free_;
    free_ = node;
    --set.size_;
    if (head_[src] == kNil) {
      tail_[src] = kNil;
      const uint32_t w = src >> 6;
      const uint32_t m = src >> 12;
      if ((set.leaf_[w] &= ~(uint64_t{1} << (src & 63))) == 0 &&
          (set.mid_[m] &= ~(uint64_t{1} << (w & 63))) == 0) {
        set.top_ &= ~(uint64_t{1} << m);
      }
    }
    return value;
  }
  // The set must not be empty.
  E Pop(InstantSet& set) { return PopFrom(set, MinSource(set)); }

 private:
  static constexpr uint32_t kNil = UINT32_MAX;
  struct Node {
    E value;
    uint32_t next = kNil;
  };

  std::vector<Node> nodes_;
  uint32_t free_ = kNil;        // free nodes, linked by next
  std::vector<uint32_t> head_;  // by source: its oldest node, or kNil
  std::vector<uint32_t> tail_;  // by source: its newest node, or kNil
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_INSTANT_QUEUE_H_
