// Protobuf messages built again and again (the kernels' commands, the scheduler's
// Completions), reused instead of allocated each time (DESIGN §3, speed: no allocation a
// pool can avoid).
//
// Contract:
// - MessagePool<T, Reset, Alloc>::Make() returns an empty T. When the last copy of the returned
//   shared_ptr is gone (e.g. the CAF message holding it was delivered and dropped), the
//   shared_ptr's deleter puts the message on a free list of its pool type (at most kMaxFree
//   messages, 1024 unless the pool says otherwise; past that it is freed), and a later Make() hands it out again after Reset()(msg).
// - Keep(msg) decides at the return whether the message goes on the free list (default: always);
//   a pool whose messages can grow large (a big DMA batch's channel request) frees those
//   instead of pinning their capacity on the free list.
// - Reset defaults to T::Clear(). Clear() frees singular sub-messages of a message not on an
//   arena; a pool whose users always set some of them may keep them with ClearKeeping.
// - Alloc allocates the shared_ptr's control block (default: base/block_pool.h's PoolAllocator,
//   which recycles freed blocks instead of returning them to the heap). One thread runs the
//   simulation; the free lists are thread-local and live until exit. Nothing built depends on
//   which message is reused.
#ifndef AHBMSIM_ACTORS_MESSAGE_POOL_H_
#define AHBMSIM_ACTORS_MESSAGE_POOL_H_

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "base/block_pool.h"

namespace ahbm::sim {

template <class T>
struct ClearMessage {
  void operator()(T& message) const { message.Clear(); }
};

template <class T>
struct KeepAll {
  bool operator()(const T&) const { return true; }
};

template <class T, class Reset = ClearMessage<T>, class Alloc = PoolAllocator<T>,
          class Keep = KeepAll<T>, size_t kMaxFreeMessages = 1024>
class MessagePool {
 public:
  // Per pool type (more would pin memory across phases); a pool whose messages are in flight by
  // the thousand at one instant (a chip's channel requests) keeps more.
  static constexpr size_t kMaxFree = kMaxFreeMessages;

  static std::shared_ptr<T> Make() {
    std::vector<T*>& free = Free();
    T* message;
    if (free.empty()) {
      message = new T();
    } else {
      message = free.back();
      free.pop_back();
      Reset()(*message);
    }
    return std::shared_ptr<T>(message, &Recycle, Alloc());
  }

 private:
  static void Recycle(T* message) {
    std::vector<T*>& free = Free();
    if (free.size() >= kMaxFree || !Keep()(*message)) {
      delete message;
      return;
    }
    free.push_back(message);
  }
  static std::vector<T*>& Free() {
    thread_local std::vector<T*>* free = new std::vector<T*>;  // never destroyed: see above
    return *free;
  }
};

// Clear()s `message` but keeps the singular sub-messages named by `fields` (cleared, still
// set), for a Reset whose pool's users always set them. A field is a pair of functions: release
// it from a message, set it back.
template <class Sub>
using KeptField = std::pair<Sub* (*)(void*), void (*)(void*, Sub*)>;

template <class T, class Sub, Sub* (T::*release)(), void (T::*set_allocated)(Sub*)>
constexpr KeptField<Sub> Kept() {
  return {[](void* m) { return (static_cast<T*>(m)->*release)(); },
          [](void* m, Sub* sub) { (static_cast<T*>(m)->*set_allocated)(sub); }};
}

template <class T, class Sub, class... More>
void ClearKeeping(T& message, KeptField<Sub> field, More... more) {
  const KeptField<Sub> fields[] = {field, more...};
  constexpr size_t kFields = 1 + sizeof...(More);
  Sub* kept[kFields];
  for (size_t i = 0; i < kFields; ++i) kept[i] = fields[i].first(&message);
  message.Clear();
  for (size_t i = 0; i < kFields; ++i) {
    if (kept[i] == nullptr) continue;
    kept[i]->Clear();
    fields[i].second(&message, kept[i]);
  }
}

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_MESSAGE_POOL_H_
