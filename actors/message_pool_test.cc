#include "actors/message_pool.h"

#include <memory>
#include <set>

#include "gtest/gtest.h"
#include "proto/commands.pb.h"

namespace ahbm::sim {
namespace {

TEST(MessagePoolTest, ReusesAMessageOnlyOnceEveryCopyIsGoneAndHandsItOutCleared) {
  MessagePool<pb::Completion> pool;
  std::shared_ptr<pb::Completion> a = pool.Make();
  a->set_cmd_id(7);
  std::shared_ptr<const pb::Completion> reader = a;  // e.g. a CAF message still holding it
  a.reset();
  std::shared_ptr<pb::Completion> b = pool.Make();
  ASSERT_NE(b.get(), reader.get());  // the first is still being read
  EXPECT_EQ(reader->cmd_id(), 7u);
  b->set_cmd_id(8);
  const std::set<const pb::Completion*> pooled = {reader.get(), b.get()};
  reader.reset();
  b.reset();

  // Both free now: the next two come from the pool, cleared, and are distinct.
  std::shared_ptr<pb::Completion> c = pool.Make();
  std::shared_ptr<pb::Completion> d = pool.Make();
  EXPECT_TRUE(pooled.contains(c.get()));
  EXPECT_TRUE(pooled.contains(d.get()));
  EXPECT_NE(c.get(), d.get());
  EXPECT_EQ(c->cmd_id(), 0u);
  EXPECT_EQ(d->cmd_id(), 0u);
  // Both held: a third is a new message.
  std::shared_ptr<pb::Completion> e = pool.Make();
  EXPECT_FALSE(pooled.contains(e.get()));
}

}  // namespace
}  // namespace ahbm::sim
