#include "cli/event_printer.h"

#include <errno.h>

#include <cstdio>
#include <cstring>

namespace keywatch::cli {

EventRecord read_event(const kw_event_t *ev) {
    EventRecord r;
    const char *name = kw_event_name(ev);
    r.event = name ? name : "";
    size_t len = 0;
    const void *key = kw_event_key(ev, &len);
    r.key = std::string_view(static_cast<const char *>(key), key ? len : 0);
    len = 0;
    const void *value = kw_event_value(ev, &len);
    r.has_value = value != nullptr;
    if (value) r.value = std::string_view(static_cast<const char *>(value), len);
    r.db = kw_event_db(ev);
    r.ts_ms = kw_event_ts_ms(ev);
    r.source = source_name(kw_event_source(ev));
    const char *queue = kw_event_queue(ev);
    r.queue = queue ? queue : "";
    const char *id = kw_event_id(ev);
    r.id = id ? id : "";
    const char *node = kw_event_node(ev);
    r.node = node ? node : "";
    r.attempt = kw_event_attempt(ev);
    r.deadline_ms = kw_event_deadline_ms(ev);
    return r;
}

bool EventPrinter::print(const EventRecord &record) {
    const std::string line = event_json(record) + '\n';
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) return false;
    errno = 0;
    if (std::fwrite(line.data(), 1, line.size(), stdout) != line.size() ||
        std::fflush(stdout) != 0) {
        broken_ = true;
        // A closed pipe means the reader is done (`| head`): stop quietly. Anything
        // else (a full disk) is an error the user must hear about.
        if (errno != EPIPE) error_ = std::string("cannot write to stdout: ") + std::strerror(errno);
        stop_->request();
        return false;
    }
    lines_.fetch_add(1);
    return true;
}

void EventPrinter::note(const std::string &text) {
    std::lock_guard<std::mutex> lock(mu_);
    std::string line = "keywatch: " + text + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
}

int EventPrinter::result_for(kw_event_t *ev, bool printed) {
    if (printed) return KW_RESULT_ACK;
    const char *queue = kw_event_queue(ev);
    if (!queue || !*queue) return KW_RESULT_ACK;  // a live event: nothing to hand back
    kw_event_set_error(ev, "keywatch watch could not write the event to its stdout");
    return KW_RESULT_RETRY;
}

int EventPrinter::handle(kw_event_t *ev, void *opaque) {
    // No exception may cross into the engine's C boundary.
    bool printed = false;
    try {
        printed = static_cast<EventPrinter *>(opaque)->print(read_event(ev));
    } catch (...) {
        printed = false;
    }
    return result_for(ev, printed);
}

bool EventPrinter::failed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return !error_.empty();
}

std::string EventPrinter::error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
}

}  // namespace keywatch::cli
