// LogFields: the structured fields of one log line, name/value pairs in order ("node",
// "127.0.0.1:6379"), and LogFn, the log function every part of the engine writes through.
// The names used (include/keywatch.h, kw_log_fields_fn): node (a line about one Redis node),
// queue (about one queue), handler (a plugin instance's line), event_id (about one event).
// Thread-safety: plain values.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "keywatch_types.h"

namespace keywatch {

using LogFields = std::vector<std::pair<std::string, std::string>>;
using LogFn =
    std::function<void(kw_log_level level, const std::string &message, const LogFields &fields)>;

// `fields` with `name` = `value` added, unless it has a field of that name already.
inline LogFields with_field(LogFields fields, const std::string &name, const std::string &value) {
    if (std::none_of(fields.begin(), fields.end(),
                     [&](const std::pair<std::string, std::string> &f) { return f.first == name; }))
        fields.emplace_back(name, value);
    return fields;
}

}  // namespace keywatch
