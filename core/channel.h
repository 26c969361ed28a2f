// Parsing of keyspace-notification channels, binary safe (keys may hold ':', spaces,
// newlines, NUL). Pure functions: thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace keywatch {

enum class ChannelKind { Keyevent, Keyspace };

struct ParsedChannel {
    ChannelKind kind;
    int db = 0;
    // Keyevent: the event name ("expired"); keyspace: the key (every remaining byte).
    std::string_view rest;
};

// Parses "__keyevent@<db>__:<event>" or "__keyspace@<db>__:<key>". The remainder after
// "__:" is taken whole, whatever bytes it holds. Returns false for anything else
// (including a db that is not a non-negative decimal number that fits an int).
bool parse_channel(std::string_view channel, ParsedChannel *out);

// "__keyevent@*__:<event>": the pattern keywatch PSUBSCRIBEs to for one event name.
std::string keyevent_pattern(std::string_view event);

}  // namespace keywatch
