// Deferred completion: a handler takes its event over with hold() and completes it later,
// from any thread, through the Hold (ack, retry with an optional delay, reject).
//
// The rules (docs/reliable-delivery.md, "Handlers and leases"):
//  - hold(ev) only inside Handler::handle, on its worker thread (else null). The handler
//    then returns KW_RESULT_PENDING. Calling hold() again in the same call returns the
//    same Hold. A handler that held but returns ACK, RETRY or REJECT completes its Hold
//    with that result. KW_RESULT_PENDING without a hold is a handler error: it counts as
//    RETRY (handler.errors, handler.retries) with the reason kPendingWithoutHold.
//  - Several handlers may match one event: the item completes when each of them has
//    (returned, or completed its Hold): ACK only if all ack; any REJECT wins; else RETRY
//    (the longest retry delay asked wins; none: the usual backoff); a Hold destroyed
//    without a completion releases the item (due again at once, the attempt given back)
//    unless another handler asked for RETRY or REJECT.
//  - Hold::complete returns KW_OK, KW_ERR_INVALID_ARG (bad result or delay: nothing done),
//    or KW_ERR_STATE: completed already, or the engine stopped (the item went back to its
//    queue). Past hold.timeout the item was released for redelivery; a completion then
//    still returns KW_OK but is not written, and is counted in items.late_acks.
//  - Untracked live events can be held too: their completion only counts (statistics).
//  - The engine holds too: an event of a handler at its max_in_flight is parked
//    (core/engine/in_flight_gate.h) under a Hold of the engine's own, which takes no place
//    in the gate. The handler's call, later, ends that Hold with its result (hand_on), or
//    holds again on the same item (Delivery's parked constructor).
// Thread-safety: Hold's methods from any thread; hold() as above; HoldHub as documented.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/base/event.h"

namespace keywatch {

// The reason recorded when a handler returns KW_RESULT_PENDING without holding.
extern const char *const kPendingWithoutHold;

// Where finished items go: the engine. Called with the hub's lock held: must not call
// back into the hub or a Hold.
class HoldOwner {
  public:
    virtual ~HoldOwner() = default;
    // A Hold of handler `handler` (its registration index) was completed with `result` by
    // its holder (for the statistics).
    virtual void hold_completed(size_t handler, int result) = 0;
    // A Hold of handler `handler` ended (completed, or released unfinished): once per Hold.
    virtual void hold_ended(size_t handler) = 0;
    // Every handler of a held item is done: its combined completion (result may be
    // kRelease, see core/sweeper/completion_store.h).
    virtual void held_item_done(const Event &ev, int result, std::string error,
                                int64_t retry_delay_ms) = 0;
};

class Held;

class Hold {
  public:
    // takes_place: its end frees a place in the handler's gate (HoldOwner::hold_ended);
    // false for the engine's own Hold on a parked event.
    Hold(std::shared_ptr<Held> item, size_t handler, bool takes_place = true)
        : item_(std::move(item)), handler_(handler), takes_place_(takes_place) {}
    // Never completed: the item is released (see above).
    ~Hold();
    Hold(const Hold &) = delete;
    Hold &operator=(const Hold &) = delete;

    // result: KW_RESULT_ACK, KW_RESULT_RETRY or KW_RESULT_REJECT; reason: for a retry or a
    // reject (kept with the item, written to the dead letter); retry_delay_ms: when the
    // retry is due (<0: the usual backoff). Any thread.
    int complete(int result, std::string reason, int64_t retry_delay_ms);
    // The engine's own Hold ends with what the handler's call said: result as complete's,
    // or kRelease; not counted as a holder's completion. KW_RESULT_ACK with no reason
    // changes nothing in the item's result. Any thread.
    int hand_on(int result, std::string reason);
    // The held event (a copy made at hold()). Any thread, while the Hold lives.
    const Event &event() const;

  private:
    friend class Delivery;
    int finish(int result, std::string reason, int64_t retry_delay_ms, bool holders = true);
    std::shared_ptr<Held> item_;
    size_t handler_;  // the holder's registration index
    bool takes_place_;
    bool done_ = false;  // under the hub's lock
};

// The engine's registry of held items: what stop() waits for and releases.
class HoldHub : public std::enable_shared_from_this<HoldHub> {
  public:
    explicit HoldHub(HoldOwner *owner) : owner_(owner) {}
    // Waits until nothing is held or timeout_ms passed; true if nothing is held. Owner.
    bool wait_idle(int64_t timeout_ms);
    // The owner goes away: completions from now on return KW_ERR_STATE. Returns the
    // events of the items still held (to be released). Owner; idempotent.
    std::vector<Event> close();
    size_t held() const;

  private:
    friend class Hold;
    friend class Delivery;
    // Merges one part's result into the item; the last part hands it to the owner.
    // Under mu_.
    void part_done(Held &item, int result, std::string reason, int64_t delay);

    mutable std::mutex mu_;
    std::condition_variable idle_;
    HoldOwner *owner_;  // null once closed
    std::unordered_map<Held *, std::shared_ptr<Held>> live_;
};

// The handler calls of one event (Engine::handle, on a worker thread). Cheap when nothing
// is held: the shared state is made on the first hold().
class Delivery {
  public:
    Delivery(HoldHub &hub, Event &ev) : hub_(hub), ev_(ev) { ev.delivery = this; }
    // The call of a parked event (ev: a copy of parked's event): a hold() in it holds the
    // same item as `parked`.
    Delivery(HoldHub &hub, Event &ev, const Hold &parked);
    ~Delivery() { ev_.delivery = nullptr; }
    Delivery(const Delivery &) = delete;
    Delivery &operator=(const Delivery &) = delete;

    // Around each handler call (of handler `handler`, its registration index): the Hold it
    // took, if any.
    void begin_call(size_t handler) {
        in_call_ = true;
        handler_ = handler;
    }
    std::shared_ptr<Hold> end_call() {
        in_call_ = false;
        return std::move(current_);
    }
    bool held() const { return item_ != nullptr; }
    // The engine's own Hold on the event for handler `handler` (see above), outside the
    // handler's calls; null when the engine stops.
    std::shared_ptr<Hold> park(size_t handler);
    // Every handler returned; result/error: what the handlers that did not hold said.
    // Only when held(): the item completes once every Hold has too.
    void finish(int result, std::string error);

  private:
    friend std::shared_ptr<Hold> hold(Event &ev);
    std::shared_ptr<Hold> take();
    std::shared_ptr<Hold> open(size_t handler, bool takes_place);  // null: closed

    HoldHub &hub_;
    Event &ev_;
    bool in_call_ = false;
    size_t handler_ = 0;  // the handler being called
    std::thread::id worker_ = std::this_thread::get_id();
    std::shared_ptr<Held> item_;
    std::shared_ptr<Hold> current_;
};

// Takes the event over (see above). Null outside a handler call or its worker thread.
std::shared_ptr<Hold> hold(Event &ev);

}  // namespace keywatch
