// The name of a connection state (kw_conn_state) as the CLI and the daemon print it:
// "disconnected", "connecting", "ready", "broken"; "unknown" for any other value (a
// statistic read as a number may hold one). Pure: thread-safe.
#pragma once

#include <cstdint>

namespace keywatch::cli {

const char *conn_state_name(int64_t state);

}  // namespace keywatch::cli
