// A protobuf message a unit sends again and again (e.g. the scheduler's Completions), reused
// instead of allocated each time (issue 10: no allocation a pool can avoid).
//
// Contract:
// - Make() returns an empty T. It stays valid while any copy of the returned shared_ptr (e.g.
//   in a CAF message) lives; once every copy is gone the pool holds the only reference and a
//   later Make() may Clear() and hand it out again.
// - Make() looks at up to kProbes pooled messages round-robin (replies are consumed roughly in
//   the order they are made), then adds one (up to kMaxPooled); past that it allocates one that
//   is not pooled.
// - Meant for messages of scalar fields: Clear() frees sub-messages of a message not on an
//   arena, so a message with sub-messages would still allocate them. Single-threaded, like the
//   engine; nothing built depends on which message is reused.
#ifndef AHBMSIM_ACTORS_MESSAGE_POOL_H_
#define AHBMSIM_ACTORS_MESSAGE_POOL_H_

#include <cstddef>
#include <memory>
#include <vector>

namespace ahbm::sim {

template <class T>
class MessagePool {
 public:
  std::shared_ptr<T> Make() {
    for (size_t probe = 0; probe < kProbes && probe < pooled_.size(); ++probe) {
      std::shared_ptr<T>& message = pooled_[next_];
      next_ = (next_ + 1) % pooled_.size();
      if (message.use_count() == 1) {
        message->Clear();
        return message;
      }
    }
    auto message = std::make_shared<T>();
    if (pooled_.size() < kMaxPooled) pooled_.push_back(message);
    return message;
  }

 private:
  static constexpr size_t kProbes = 4;
  static constexpr size_t kMaxPooled = 16;

  std::vector<std::shared_ptr<T>> pooled_;
  size_t next_ = 0;
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_MESSAGE_POOL_H_
