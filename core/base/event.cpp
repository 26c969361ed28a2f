#include "core/base/event.h"

namespace keywatch {

const std::string &event_id(const Event &ev) {
    if (!ev.id.empty()) return ev.id;
    static const char hex[] = "0123456789abcdef";
    std::string id = ev.tracked() ? "q:" + ev.queue + ":" + std::to_string(ev.deadline_ms) + ":"
                                  : "n:" + std::to_string(ev.db) + ":" + ev.name + ":";
    id.reserve(id.size() + ev.key.size() * 2);
    for (unsigned char c : ev.key) {
        id.push_back(hex[c >> 4]);
        id.push_back(hex[c & 15]);
    }
    ev.id = std::move(id);
    return ev.id;
}

}  // namespace keywatch
