// SlotQueue's claim batches (core/sweeper/slot_queue.h): when the acks of a batch may go out
// as one whole-batch '*' ack, which removes every item still in the batch key. Trap T7: an
// item that left its batch any other way (a retry or rejection whose fail call has not been
// applied yet, e.g. sent again after a transient error) must never be swept away by '*'.
#include <gtest/gtest.h>

#include "core/sweeper/slot_queue.h"

namespace kwtest {
namespace {

using keywatch::SlotQueue;

SlotQueue queue_with_batch(uint64_t seq, size_t held) {
    SlotQueue q;
    q.batches[seq].b = 4;
    q.batches[seq].held = held;
    return q;
}

TEST(SlotQueueBatchTest, EveryItemAckedInOneCallIsTheWholeBatch) {
    SlotQueue q = queue_with_batch(7, 2);
    q.batch_left(7, true);
    EXPECT_TRUE(q.batch_open(7)) << "its acks may wait for the other item";
    q.batch_left(7, true);
    EXPECT_TRUE(q.acks_sent(7, 2));
    EXPECT_EQ(q.batches.count(7), 0u) << "nothing of it left to wait for";
}

TEST(SlotQueueBatchTest, AnAckAfterAFailWhoseCallFailedIsNeverAWholeBatchAck) {
    SlotQueue q = queue_with_batch(7, 2);
    // Item A retried: its fail call goes out, meets a transient error, waits to be sent
    // again (the batch is not told: it learns of A's leaving at the completion).
    q.batch_left(7, false);
    EXPECT_FALSE(q.batch_open(7)) << "no ack waits for a batch that cannot go whole";
    // Item B acked: one ack in one call, yet not the whole batch (A is still in its key).
    q.batch_left(7, true);
    EXPECT_FALSE(q.acks_sent(7, 1));
    // That ack sent again after a transient error of its own: still item by item.
    EXPECT_FALSE(q.acks_sent(7, 1));
}

TEST(SlotQueueBatchTest, AnAckSentBeforeTheOthersEndsTheBatchsWholeness) {
    SlotQueue q = queue_with_batch(7, 2);
    q.batch_left(7, true);
    EXPECT_FALSE(q.acks_sent(7, 1)) << "one item of two";
    q.batch_left(7, true);
    EXPECT_FALSE(q.acks_sent(7, 1)) << "the first ack already went out by id";
}

}  // namespace
}  // namespace kwtest
