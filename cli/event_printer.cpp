#include "cli/event_printer.h"

#include <errno.h>

#include <cstdio>
#include <cstring>

namespace keywatch::cli {

bool EventPrinter::print(const kw_event_t *ev) {
    char *json = nullptr;
    size_t len = 0;
    if (kw_event_json(ev, &json, &len) != KW_OK) return false;
    std::string line(json, len);
    kw_free(json);
    line += '\n';
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
        printed = static_cast<EventPrinter *>(opaque)->print(ev);
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
