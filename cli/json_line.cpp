#include "cli/json_line.h"

#include <nlohmann/json.hpp>

#include "cli/base64.h"
#include "cli/utf8.h"

namespace keywatch::cli {
namespace {

using Json = nlohmann::ordered_json;  // keeps fields in the documented order

// name: text when it is valid UTF-8, else name_b64: base64 of the bytes.
void put_bytes(Json &j, const std::string &name, std::string_view bytes) {
    if (is_valid_utf8(bytes))
        j[name] = std::string(bytes);
    else
        j[name + "_b64"] = base64_encode(bytes);
}

}  // namespace

std::string json_line(const EventRecord &r) {
    Json j;
    j["event"] = std::string(r.event);
    put_bytes(j, "key", r.key);
    j["db"] = r.db;
    j["ts_ms"] = r.ts_ms;
    j["source"] = std::string(r.source);
    j["id"] = std::string(r.id);
    j["node"] = std::string(r.node);
    if (r.deadline_ms != 0) j["deadline_ms"] = r.deadline_ms;
    if (r.attempt > 1) j["attempt"] = r.attempt;
    if (r.has_value) put_bytes(j, "value", r.value);
    // Only event, source, id and node can still hold invalid UTF-8 (a socket path, say):
    // replace such bytes rather than throw.
    std::string line = j.dump(-1, ' ', false, Json::error_handler_t::replace);
    line += '\n';
    return line;
}

}  // namespace keywatch::cli
