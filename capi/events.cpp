// The C API's events, handlers and holds: accessors over keywatch::Event (kw_event_t is
// one behind an opaque pointer), the kw_handler_fn adapter and deferred completion
// (core/engine/hold.h). No C++ exception crosses this boundary.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "capi/c_handler.h"
#include "core/base/c_out.h"
#include "core/engine/hold.h"
#include "core/format/json_line.h"
#include "keywatch.h"

struct kw_hold_s {
    std::shared_ptr<keywatch::Hold> hold;
};

namespace {

const keywatch::Event *E(const kw_event_t *ev) {
    return reinterpret_cast<const keywatch::Event *>(ev);
}

keywatch::Event *E(kw_event_t *ev) {
    return reinterpret_cast<keywatch::Event *>(ev);
}

}  // namespace

namespace keywatch {

CHandler::~CHandler() {
    if (free_opaque_) free_opaque_(opaque_);
}

int CHandler::handle(Event &ev) {
    return fn_(to_c(&ev), opaque_);
}

const std::string &CHandler::name() const {
    static const std::string name = "c";
    return name;
}

}  // namespace keywatch

const char *kw_event_name(const kw_event_t *ev) {
    return ev ? E(ev)->name.c_str() : "";
}

const void *kw_event_key(const kw_event_t *ev, size_t *len) {
    if (!ev) {
        if (len) *len = 0;
        return nullptr;
    }
    if (len) *len = E(ev)->key.size();
    return E(ev)->key.data();
}

const void *kw_event_value(const kw_event_t *ev, size_t *len) {
    if (!ev || !E(ev)->has_value) {
        if (len) *len = 0;
        return nullptr;
    }
    if (len) *len = E(ev)->value.size();
    return E(ev)->value.data();
}

int kw_event_db(const kw_event_t *ev) {
    return ev ? E(ev)->db : -1;
}
int64_t kw_event_ts_ms(const kw_event_t *ev) {
    return ev ? E(ev)->ts_ms : 0;
}
int64_t kw_event_deadline_ms(const kw_event_t *ev) {
    return ev ? E(ev)->deadline_ms : 0;
}
int kw_event_attempt(const kw_event_t *ev) {
    return ev ? E(ev)->attempt : 0;
}
int kw_event_max_attempts(const kw_event_t *ev) {
    return ev ? E(ev)->max_attempts : 0;
}
const char *kw_event_last_error(const kw_event_t *ev) {
    return ev ? E(ev)->last_error.c_str() : "";
}
kw_source kw_event_source(const kw_event_t *ev) {
    return ev ? E(ev)->source : KW_SOURCE_NOTIFICATION;
}

const char *kw_source_name(kw_source source) {
    return keywatch::source_name(source);
}

const char *kw_event_id(const kw_event_t *ev) {
    if (!ev) return "";
    try {
        return keywatch::event_id(*E(ev)).c_str();
    } catch (...) {
        return "";
    }
}

const char *kw_event_node(const kw_event_t *ev) {
    return ev && E(ev)->node ? E(ev)->node->c_str() : "";
}

const char *kw_event_queue(const kw_event_t *ev) {
    return ev ? E(ev)->queue.c_str() : "";
}

void kw_event_set_error(kw_event_t *ev, const char *reason) {
    if (!ev) return;
    try {
        E(ev)->error = reason ? reason : "";
    } catch (...) {
    }
}

int kw_event_json(const kw_event_t *ev, char **out, size_t *len) {
    if (len) *len = 0;
    if (!out) return KW_ERR_INVALID_ARG;
    *out = nullptr;
    if (!ev) return KW_ERR_INVALID_ARG;
    try {
        const std::string json = keywatch::event_json(*E(ev));
        char *text = keywatch::malloc_copy(json);
        if (!text) return KW_ERR_NOMEM;
        *out = text;
        if (len) *len = json.size();
        return KW_OK;
    } catch (const std::bad_alloc &) {
        return KW_ERR_NOMEM;
    } catch (...) {
        return KW_ERR_INTERNAL;
    }
}

/* ---- held events ---- */

kw_hold_t *kw_event_hold(kw_event_t *ev) {
    if (!ev) return nullptr;
    try {
        std::shared_ptr<keywatch::Hold> h = keywatch::hold(*E(ev));
        return h ? new kw_hold_s{std::move(h)} : nullptr;
    } catch (...) {
        return nullptr;
    }
}

const kw_event_t *kw_hold_event(const kw_hold_t *h) {
    if (!h) return nullptr;
    return reinterpret_cast<const kw_event_t *>(&h->hold->event());
}

int kw_event_complete(kw_hold_t *h, int result, const char *reason, int64_t retry_delay_ms) {
    if (!h) return KW_ERR_INVALID_ARG;
    try {
        return h->hold->complete(result, reason ? reason : "", retry_delay_ms);
    } catch (const std::bad_alloc &) {
        return KW_ERR_NOMEM;
    } catch (...) {
        return KW_ERR_INTERNAL;
    }
}

void kw_hold_free(kw_hold_t *h) {
    try {
        delete h;
    } catch (...) {
    }
}
