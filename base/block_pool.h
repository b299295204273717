// A recycling block allocator every layer may use (single simulation thread).
#ifndef AHBMSIM_BASE_BLOCK_POOL_H_
#define AHBMSIM_BASE_BLOCK_POOL_H_

#include <cstddef>
#include <new>
#include <vector>

namespace ahbm {

// Blocks recycled by size class (64 B steps up to 8 KiB): coroutine frames (a kernel calls its
// helper coroutines once per tile; a fresh heap frame of a few KiB each time cost a
// malloc_consolidate per call) and the shared_ptr control blocks of pooled messages. One
// thread runs the simulation; the free lists are thread-local (a block freed on another thread
// joins that thread's lists) and keep their blocks until exit. Nothing observable depends on which block an object gets.
class BlockPool {
 public:
  static constexpr std::size_t kStep = 64;
  static constexpr std::size_t kClasses = 128;  // blocks up to 8 KiB are pooled

  static void* Allocate(std::size_t size) {
    const std::size_t c = (size + kStep - 1) / kStep;
    if (c >= kClasses) return ::operator new(size);
    std::vector<void*>& list = Lists()[c];
    if (list.empty()) return ::operator new(c * kStep);
    void* p = list.back();
    list.pop_back();
    return p;
  }
  static void Free(void* p, std::size_t size) noexcept {
    const std::size_t c = (size + kStep - 1) / kStep;
    if (c >= kClasses) {
      ::operator delete(p);
      return;
    }
    std::vector<void*>& list = Lists()[c];
    try {
      list.push_back(p);
    } catch (...) {
      ::operator delete(p);
    }
  }

 private:
  struct Holder {
    std::vector<void*> lists[kClasses];
  };
  // Never destroyed: a block may come back after thread-local destructors have run (an
  // object freed by a static's destructor); the cached blocks stay reachable until exit.
  static std::vector<void*>* Lists() {
    thread_local Holder* holder = new Holder;
    return holder->lists;
  }
};

// An allocator over BlockPool, for std::allocate_shared of per-call objects (the kernel
// runtime's invocations and commands) and shared_ptr control blocks (actors/message_pool.h):
// recycled blocks instead of the heap each time.
template <class T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <class U>
  PoolAllocator(const PoolAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(BlockPool::Allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { BlockPool::Free(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const PoolAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace ahbm

#endif  // AHBMSIM_BASE_BLOCK_POOL_H_
