// Task<T>: the C++20 coroutine type of kernels and of the helpers they `co_await`
// (DESIGN §4). Lazy: nothing runs until it is awaited or the runtime resumes it. Awaiting a
// Task runs it with symmetric transfer and resumes the awaiter when it finishes; an exception
// escaping the task is rethrown in the awaiter. The kernel runtime owns top-level tasks.
//
// GCC 12 (PR 100611): do not `co_await T{...}` on an aggregate temporary with a non-trivial
// destructor; awaitables here have constructors.
#ifndef AHBMSIM_KERNELS_RUNTIME_TASK_H_
#define AHBMSIM_KERNELS_RUNTIME_TASK_H_

#include <coroutine>
#include <cstddef>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "base/block_pool.h"

namespace ahbm::kernels {

template <class T = void>
class Task;

namespace internal {

// Coroutine frames and the runtime's per-call objects come from the recycling pool of
// base/block_pool.h (a kernel calls its helper coroutines once per tile).
using FramePool = ::ahbm::BlockPool;
template <class T>
using PoolAllocator = ::ahbm::PoolAllocator<T>;

struct PromiseBase {
  static void* operator new(std::size_t size) { return FramePool::Allocate(size); }
  static void operator delete(void* p, std::size_t size) noexcept { FramePool::Free(p, size); }

  std::coroutine_handle<> continuation;
  std::exception_ptr error;

  struct FinalAwaiter {
    bool await_ready() noexcept { return false; }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
      std::coroutine_handle<> next = h.promise().continuation;
      return next ? next : std::noop_coroutine();
    }
    void await_resume() noexcept {}
  };

  std::suspend_always initial_suspend() noexcept { return {}; }
  FinalAwaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() { error = std::current_exception(); }
};

template <class T>
struct Promise : PromiseBase {
  std::optional<T> value;
  Task<T> get_return_object();
  template <class U>
  void return_value(U&& v) {
    value.emplace(std::forward<U>(v));
  }
};

template <>
struct Promise<void> : PromiseBase {
  Task<void> get_return_object();
  void return_void() {}
};

}  // namespace internal

template <class T>
class Task {
 public:
  using promise_type = internal::Promise<T>;
  using Handle = std::coroutine_handle<promise_type>;

  explicit Task(Handle h) : handle_(h) {}
  Task(Task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Task& operator=(Task&& other) noexcept {
    if (this != &other) {
      if (handle_) handle_.destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() {
    if (handle_) handle_.destroy();
  }

  // Awaiting: start the task, resume the awaiter when it is done.
  bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiter) noexcept {
    handle_.promise().continuation = awaiter;
    return handle_;
  }
  T await_resume() {
    if (handle_.promise().error) std::rethrow_exception(handle_.promise().error);
    if constexpr (!std::is_void_v<T>) return std::move(*handle_.promise().value);
  }

  // For the runtime (top-level tasks).
  Handle handle() const { return handle_; }
  bool done() const { return handle_ && handle_.done(); }
  std::exception_ptr error() const { return handle_.promise().error; }

 private:
  Handle handle_;
};

namespace internal {

template <class T>
Task<T> Promise<T>::get_return_object() {
  return Task<T>(std::coroutine_handle<Promise<T>>::from_promise(*this));
}

inline Task<void> Promise<void>::get_return_object() {
  return Task<void>(std::coroutine_handle<Promise<void>>::from_promise(*this));
}

}  // namespace internal
}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_RUNTIME_TASK_H_
