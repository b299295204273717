// A FIFO over one std::vector and a head index. Unlike std::deque (whose default constructor
// allocates a map and a 512-byte block, and which allocates a block per few elements), it
// allocates nothing while empty and a steady stream of pushes and pops reuses one buffer:
// pop_front advances the head, the vector is cleared when the FIFO empties and compacted when
// the popped prefix is at least half of it (amortised O(1)). push_back and pop_front may move
// the elements (references and iterators are invalidated).
#ifndef AHBMSIM_BASE_VECTOR_FIFO_H_
#define AHBMSIM_BASE_VECTOR_FIFO_H_

#include <cstddef>
#include <iterator>
#include <utility>
#include <vector>

namespace ahbm {

template <class T>
class VectorFifo {
 public:
  bool empty() const { return head_ == items_.size(); }
  size_t size() const { return items_.size() - head_; }
  T& operator[](size_t i) { return items_[head_ + i]; }
  const T& operator[](size_t i) const { return items_[head_ + i]; }
  T& front() { return items_[head_]; }
  const T& front() const { return items_[head_]; }
  T& back() { return items_.back(); }
  const T& back() const { return items_.back(); }
  auto begin() { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  auto end() { return items_.end(); }
  auto begin() const { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  auto end() const { return items_.end(); }
  auto rbegin() { return std::make_reverse_iterator(end()); }
  auto rend() { return std::make_reverse_iterator(begin()); }

  template <class... Args>
  T& emplace_back(Args&&... args) {
    return items_.emplace_back(std::forward<Args>(args)...);
  }
  void push_back(T item) { items_.push_back(std::move(item)); }
  void pop_front() {
    ++head_;
    if (head_ == items_.size()) {
      items_.clear();
      head_ = 0;
    } else if (head_ >= kMinCompact && 2 * head_ >= items_.size()) {
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }

 private:
  static constexpr size_t kMinCompact = 16;  // no compaction for a popped prefix below this
  std::vector<T> items_;
  size_t head_ = 0;  // items_[0 .. head_) are popped
};

}  // namespace ahbm

#endif  // AHBMSIM_BASE_VECTOR_FIFO_H_
