#include "core/format/json_line.h"

#include <nlohmann/json.hpp>

#include "core/base/event.h"
#include "core/format/json_bytes.h"

namespace keywatch {
namespace {

using Json = nlohmann::ordered_json;  // keeps fields in the documented order
using Fields = std::vector<std::pair<std::string, std::string>>;

// What put_fields and put_bytes write into a JSON object, appended as name and text.
struct FieldList {
    struct Slot {
        Fields *out;
        std::string name;
        void operator=(std::string value) { out->emplace_back(std::move(name), std::move(value)); }
        void operator=(int64_t value) { *this = std::to_string(value); }
    };
    Fields out;
    Slot operator[](std::string name) { return Slot{&out, std::move(name)}; }
};

// The one list of the event's fields, their names and order, into a Json or a FieldList.
template <typename Out>
void put_fields(const EventRecord &r, Out &j) {
    j["event"] = std::string(r.event);
    put_bytes(j, "key", r.key);
    if (r.has_value) put_bytes(j, "value", r.value);
    j["db"] = static_cast<int64_t>(r.db);
    j["ts_ms"] = r.ts_ms;
    if (r.deadline_ms != 0) j["deadline_ms"] = r.deadline_ms;
    j["attempt"] = static_cast<int64_t>(r.attempt);
    j["source"] = std::string(r.source);
    if (!r.queue.empty()) j["queue"] = std::string(r.queue);
    j["id"] = std::string(r.id);
    j["node"] = std::string(r.node);
}

}  // namespace

const char *source_name(kw_source source) {
    switch (source) {
        case KW_SOURCE_NOTIFICATION:
            return "notification";
        case KW_SOURCE_SWEEP:
            return "sweep";
        case KW_SOURCE_LEASE_EXPIRED:
            return "lease_expired";
        case KW_SOURCE_TASK:
            return "task";
    }
    return "unknown";
}

EventRecord event_record(const Event &ev) {
    EventRecord r;
    r.event = ev.name;
    r.key = ev.key;
    r.has_value = ev.has_value;
    if (ev.has_value) r.value = ev.value;
    r.db = ev.db;
    r.ts_ms = ev.ts_ms;
    r.source = source_name(ev.source);
    r.queue = ev.queue;
    r.id = event_id(ev);
    r.node = ev.node ? std::string_view(*ev.node) : std::string_view();
    r.attempt = ev.attempt;
    r.deadline_ms = ev.deadline_ms;
    return r;
}

nlohmann::ordered_json event_object(const EventRecord &r) {
    Json j;
    put_fields(r, j);
    return j;
}

Fields event_fields(const EventRecord &r) {
    FieldList list;
    list.out.reserve(11);
    put_fields(r, list);
    return std::move(list.out);
}

std::string event_json(const nlohmann::ordered_json &object) {
    return object.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string event_json(const EventRecord &record) {
    return event_json(event_object(record));
}

std::string event_json(const Event &ev) {
    return event_json(event_record(ev));
}

}  // namespace keywatch
