#include "core/engine/hold.h"

#include <chrono>

#include "core/sweeper/completion_store.h"
#include "core/base/time_limit.h"

namespace keywatch {

const char *const kPendingWithoutHold =
    "the handler returned KW_RESULT_PENDING without holding the event (kw_event_hold)";

// One held event: shared by its Holds and the hub. Fields under the hub's lock, except
// `event`, which never changes after construction.
class Held {
  public:
    Held(std::shared_ptr<HoldHub> h, const Event &ev) : hub(std::move(h)), event(ev) {
        event.delivery = nullptr;
        event_id(event);  // built now: event() is read from any thread
    }
    const std::shared_ptr<HoldHub> hub;
    Event event;
    int parts = 1;  // the handler calls still running, then one per open Hold
    int result = KW_RESULT_ACK;
    std::string error;
    int64_t delay = -1;
    bool closed = false;  // the engine stopped: completions are refused
};

namespace {

// How results combine: the higher rank wins (unknown codes count as REJECT).
int rank(int result) {
    switch (result) {
        case KW_RESULT_ACK:
            return 0;
        case kRelease:
            return 1;
        case KW_RESULT_RETRY:
            return 2;
        default:
            return 3;
    }
}

}  // namespace

void HoldHub::part_done(Held &item, int result, std::string reason, int64_t delay) {
    if (rank(result) > rank(item.result)) {
        item.result = rank(result) == 3 ? static_cast<int>(KW_RESULT_REJECT) : result;
        item.error = std::move(reason);
    } else if (rank(result) == rank(item.result) && item.error.empty()) {
        item.error = std::move(reason);
    }
    if (result == KW_RESULT_RETRY && delay > item.delay) item.delay = delay;
    if (--item.parts > 0) return;
    if (owner_)
        owner_->held_item_done(item.event, item.result, std::move(item.error),
                               item.result == KW_RESULT_RETRY ? item.delay : -1);
    live_.erase(&item);  // the caller still holds a reference
    if (live_.empty()) idle_.notify_all();
}

bool HoldHub::wait_idle(int64_t timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return idle_.wait_for(lock, std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms),
                          [this] { return live_.empty(); });
}

std::vector<Event> HoldHub::close() {
    std::lock_guard<std::mutex> lock(mu_);
    owner_ = nullptr;
    std::vector<Event> left;
    for (auto &kv : live_) {
        kv.second->closed = true;
        left.push_back(kv.second->event);
    }
    live_.clear();
    return left;
}

size_t HoldHub::held() const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.size();
}

Hold::~Hold() {
    finish(kRelease, "", -1);
}

int Hold::complete(int result, std::string reason, int64_t retry_delay_ms) {
    if (result != KW_RESULT_ACK && result != KW_RESULT_RETRY && result != KW_RESULT_REJECT)
        return KW_ERR_INVALID_ARG;
    if (retry_delay_ms > 0 && !duration_within_max(retry_delay_ms)) return KW_ERR_INVALID_ARG;
    return finish(result, std::move(reason), retry_delay_ms);
}

int Hold::hand_on(int result, std::string reason) {
    return finish(result, std::move(reason), -1, false);
}

int Hold::finish(int result, std::string reason, int64_t retry_delay_ms, bool holders) {
    HoldHub &hub = *item_->hub;
    std::lock_guard<std::mutex> lock(hub.mu_);
    if (done_ || item_->closed) return KW_ERR_STATE;
    done_ = true;
    if (holders && result != kRelease && hub.owner_) hub.owner_->hold_completed(handler_, result);
    hub.part_done(*item_, result, std::move(reason), retry_delay_ms);
    if (takes_place_ && hub.owner_) hub.owner_->hold_ended(handler_);
    return KW_OK;
}

const Event &Hold::event() const {
    return item_->event;
}

Delivery::Delivery(HoldHub &hub, Event &ev, const Hold &parked)
    : hub_(hub), ev_(ev), item_(parked.item_) {
    ev.delivery = this;
}

std::shared_ptr<Hold> Delivery::take() {
    if (!current_) current_ = open(handler_, true);
    return current_;
}

std::shared_ptr<Hold> Delivery::park(size_t handler) {
    return open(handler, false);
}

std::shared_ptr<Hold> Delivery::open(size_t handler, bool takes_place) {
    std::lock_guard<std::mutex> lock(hub_.mu_);
    if (!hub_.owner_) return nullptr;  // stopping: nothing may be held any more
    if (item_ && item_->closed) return nullptr;
    if (!item_) {
        item_ = std::make_shared<Held>(hub_.shared_from_this(), ev_);
        hub_.live_.emplace(item_.get(), item_);
    }
    item_->parts++;
    return std::make_shared<Hold>(item_, handler, takes_place);
}

void Delivery::finish(int result, std::string error) {
    std::lock_guard<std::mutex> lock(hub_.mu_);
    if (item_->closed) return;
    hub_.part_done(*item_, result, std::move(error), -1);
}

std::shared_ptr<Hold> hold(Event &ev) {
    Delivery *d = ev.delivery;
    if (!d || !d->in_call_ || d->worker_ != std::this_thread::get_id()) return nullptr;
    return d->take();
}

}  // namespace keywatch
