#include "core/format/json_line.h"

#include <nlohmann/json.hpp>

#include "core/format/json_bytes.h"

namespace keywatch::cli {
namespace {

using Json = nlohmann::ordered_json;  // keeps fields in the documented order

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

nlohmann::ordered_json json_object(const EventRecord &r) {
    Json j;
    j["event"] = std::string(r.event);
    put_bytes(j, "key", r.key);
    if (r.has_value) put_bytes(j, "value", r.value);
    j["db"] = r.db;
    j["ts_ms"] = r.ts_ms;
    if (r.deadline_ms != 0) j["deadline_ms"] = r.deadline_ms;
    j["attempt"] = r.attempt;
    j["source"] = std::string(r.source);
    if (!r.queue.empty()) j["queue"] = std::string(r.queue);
    j["id"] = std::string(r.id);
    j["node"] = std::string(r.node);
    return j;
}

std::string json_line(const EventRecord &r) {
    Json j = json_object(r);
    // Only event, source, queue, id and node can still hold invalid UTF-8 (a socket path):
    // replace such bytes rather than throw.
    std::string line = j.dump(-1, ' ', false, Json::error_handler_t::replace);
    line += '\n';
    return line;
}

}  // namespace keywatch::cli
