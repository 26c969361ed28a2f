#include "bindings/src/held_events.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <pybind11/stl.h>

#include "bindings/src/event_binding.h"
#include "bindings/src/status_error.h"

namespace py = pybind11;

namespace keywatch::python {

HeldEvents::HeldEvents(size_t limit) : limit_(limit ? limit : 1) {
    fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd_ < 0)
        throw StatusError(KW_ERR_INTERNAL, std::string("eventfd: ") + std::strerror(errno));
}

HeldEvents::~HeldEvents() {
    for (auto &[handler, hold] : queue_) capi::hold_free(hold);  // items go back to Redis
    close_fd();
}

void HeldEvents::close_fd() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

bool HeldEvents::reserve() {
    std::unique_lock<std::mutex> lock(mu_);
    room_.wait(lock, [&] { return closed_ || outstanding_ < limit_; });
    if (closed_) return false;
    outstanding_++;
    return true;
}

void HeldEvents::push(int handler, kw_hold_t *hold) {
    bool wake;
    {
        std::lock_guard<std::mutex> lock(mu_);
        wake = queue_.empty();
        queue_.emplace_back(handler, hold);
    }
    if (wake) {
        const uint64_t one = 1;
        // EAGAIN only when the counter is full: the loop is awake already.
        (void)!::write(fd_, &one, sizeof one);
    }
}

std::vector<std::pair<int, kw_hold_t *>> HeldEvents::take() {
    uint64_t count;
    (void)!::read(fd_, &count, sizeof count);  // clears the wake-up (EAGAIN if none)
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::pair<int, kw_hold_t *>> out(queue_.begin(), queue_.end());
    queue_.clear();
    return out;
}

void HeldEvents::release_one() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (outstanding_ > 0) outstanding_--;
    }
    room_.notify_one();
}

void HeldEvents::close() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        closed_ = true;
    }
    room_.notify_all();
}

void HeldEvents::open() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = false;
}

Hold::Hold(kw_hold_t *hold, std::shared_ptr<HeldEvents> held)
    : hold_(hold), held_(std::move(held)) {}

Hold::~Hold() {
    // Never completed (a cancelled task, a dropped hold): freeing the last handle gives
    // the item back to its queue.
    if (hold_) finish();
}

void Hold::finish() {
    if (event_) event_.cast<Event &>().complete();
    capi::hold_free(hold_);
    hold_ = nullptr;
    held_->release_one();
}

py::object Hold::event() {
    if (!event_) {
        if (!hold_) raise_python_error("EventCompleted", "this held event was completed");
        event_ = py::cast(Event(Event::Held{}, capi::hold_event(hold_)));
    }
    return event_;
}

bool Hold::complete(int result, std::optional<std::string> reason, int64_t retry_delay_ms) {
    if (!hold_) raise_python_error("EventCompleted", "this held event was completed already");
    int rc =
        capi::event_complete(hold_, result, reason ? reason->c_str() : nullptr, retry_delay_ms);
    finish();
    if (rc == KW_ERR_STATE) return false;
    check(rc, "kw_event_complete");
    return true;
}

void bind_hold(py::module_ &m) {
    py::class_<Hold>(m, "Hold", "A held event (deferred completion), completed once.")
        .def_property_readonly("event", &Hold::event)
        .def("complete", &Hold::complete, py::arg("result"), py::arg("reason"),
             py::arg("retry_delay_ms"));
}

}  // namespace keywatch::python
