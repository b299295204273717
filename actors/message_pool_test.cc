#include "actors/message_pool.h"

#include <cstdint>
#include <memory>

#include "gtest/gtest.h"
#include "proto/commands.pb.h"

namespace ahbm::sim {
namespace {

TEST(MessagePoolTest, ReusesAMessageOnlyOnceEveryCopyIsGoneAndHandsItOutCleared) {
  using Pool = MessagePool<pb::Completion>;
  std::shared_ptr<pb::Completion> a = Pool::Make();
  a->set_cmd_id(7);
  std::shared_ptr<const pb::Completion> reader = a;  // e.g. a CAF message still holding it
  a.reset();
  std::shared_ptr<pb::Completion> b = Pool::Make();
  ASSERT_NE(b.get(), reader.get());  // the first is still being read
  EXPECT_EQ(reader->cmd_id(), 7u);
  const pb::Completion* first = reader.get();
  reader.reset();  // the last copy: back to the pool

  std::shared_ptr<pb::Completion> c = Pool::Make();
  EXPECT_EQ(c.get(), first);
  EXPECT_EQ(c->cmd_id(), 0u);
  std::shared_ptr<pb::Completion> d = Pool::Make();  // none free: a new one
  EXPECT_NE(d.get(), first);
  EXPECT_NE(d.get(), b.get());
}

// The pools' default control-block allocator (base/block_pool.h): a freed block is handed out
// again, one of another size class is not.
TEST(PoolAllocatorTest, HandsAFreedBlockOutAgainAndOtherSizesElsewhere) {
  struct Block {
    uint64_t a, b;
  };
  PoolAllocator<Block> alloc;
  Block* first = alloc.allocate(1);
  Block* second = alloc.allocate(1);
  EXPECT_NE(first, second);
  alloc.deallocate(first, 1);
  EXPECT_EQ(alloc.allocate(1), first);  // the freed block, reused
  Block* array = alloc.allocate(8);     // 128 B: another size class than 16 B
  alloc.deallocate(first, 1);
  Block* third = alloc.allocate(1);
  EXPECT_EQ(third, first);              // not the array's block
  alloc.deallocate(array, 8);
  alloc.deallocate(second, 1);
  alloc.deallocate(third, 1);
}

// Keeps only requests with at most 4 parts' capacity.
struct KeepSmall {
  bool operator()(const pb::HbmRequest& r) const { return r.part_cmd().Capacity() <= 4; }
};

TEST(MessagePoolTest, AMessageTheKeepPredicateRefusesIsFreedNotPooled) {
  using Pool = MessagePool<pb::HbmRequest, ClearMessage<pb::HbmRequest>,
                           std::allocator<pb::HbmRequest>, KeepSmall>;
  std::shared_ptr<pb::HbmRequest> small = Pool::Make();
  small->add_part_cmd(1);
  const pb::HbmRequest* small_ptr = small.get();
  small.reset();  // kept
  std::shared_ptr<pb::HbmRequest> again = Pool::Make();
  EXPECT_EQ(again.get(), small_ptr);
  EXPECT_EQ(again->part_cmd_size(), 0);
  for (int i = 0; i < 100; ++i) again->add_part_cmd(i);  // grows past the limit
  again.reset();  // freed
  std::shared_ptr<pb::HbmRequest> fresh = Pool::Make();
  EXPECT_LE(fresh->part_cmd().Capacity(), 4);  // not the big one back
}

struct KeepSrc {
  void operator()(pb::DmaCmd& cmd) const {
    ClearKeeping(cmd, Kept<pb::DmaCmd, pb::TensorRef, &pb::DmaCmd::release_src,
                           &pb::DmaCmd::set_allocated_src>());
  }
};

TEST(MessagePoolTest, ClearKeepingKeepsTheNamedSubMessagesClearedAndFreesTheRest) {
  using Pool = MessagePool<pb::DmaCmd, KeepSrc>;
  std::shared_ptr<pb::DmaCmd> a = Pool::Make();
  a->set_cmd_id(3);
  a->mutable_src()->add_shape(5);
  a->mutable_dst()->set_addr(64);
  const pb::TensorRef* src = &a->src();
  const pb::DmaCmd* first = a.get();
  a.reset();

  std::shared_ptr<pb::DmaCmd> b = Pool::Make();
  ASSERT_EQ(b.get(), first);
  EXPECT_EQ(b->cmd_id(), 0u);
  EXPECT_TRUE(b->has_src());
  EXPECT_EQ(&b->src(), src);  // the same TensorRef object, cleared
  EXPECT_EQ(b->src().shape_size(), 0);
  EXPECT_FALSE(b->has_dst());
}

}  // namespace
}  // namespace ahbm::sim
