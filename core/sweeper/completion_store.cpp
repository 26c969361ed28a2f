#include "core/sweeper/completion_store.h"

#include <algorithm>
#include <iterator>

namespace keywatch {

std::vector<Completion> CompletionStore::take_waiting() {
    std::vector<Completion> out;
    out.swap(waiting_);
    return out;
}

CompletionStore::Ticket CompletionStore::sent(std::vector<Completion> &&batch) {
    Ticket t = next_++;
    in_flight_count_ += batch.size();
    in_flight_.emplace(t, std::move(batch));
    return t;
}

void CompletionStore::confirmed(Ticket t) {
    (void)take(t);
}

void CompletionStore::retry_later(Ticket t) {
    for (auto &c : take(t)) waiting_.push_back(std::move(c));
}

std::vector<Completion> CompletionStore::take(Ticket t) {
    auto it = in_flight_.find(t);
    if (it == in_flight_.end()) return {};  // given back already (connection lost)
    std::vector<Completion> batch = std::move(it->second);
    in_flight_.erase(it);
    in_flight_count_ -= batch.size();
    return batch;
}

void CompletionStore::connection_lost() {
    for (auto &kv : in_flight_)
        for (auto &c : kv.second) waiting_.push_back(std::move(c));
    in_flight_.clear();
    in_flight_count_ = 0;
}

std::vector<Completion> CompletionStore::take_all() {
    connection_lost();
    return take_waiting();
}

std::optional<int64_t> CompletionStore::first_lease_end(int64_t lease_ms) const {
    std::optional<int64_t> first;
    auto consider = [&](const Completion &c) {
        if (c.leased_ms > 0 && (!first || c.leased_ms + lease_ms < *first))
            first = c.leased_ms + lease_ms;
    };
    for (const Completion &c : waiting_) consider(c);
    for (const auto &kv : in_flight_)
        for (const Completion &c : kv.second) consider(c);
    return first;
}

std::vector<Completion> CompletionStore::drop_expired(int64_t now_ms, int64_t lease_ms) {
    auto gone = std::stable_partition(waiting_.begin(), waiting_.end(), [&](const Completion &c) {
        return !lease_surely_ended(c, now_ms, lease_ms);
    });
    std::vector<Completion> dropped(std::make_move_iterator(gone),
                                    std::make_move_iterator(waiting_.end()));
    waiting_.erase(gone, waiting_.end());
    return dropped;
}

}  // namespace keywatch
