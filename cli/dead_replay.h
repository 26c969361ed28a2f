// Replaying dead letters in bounded batches: the loop `keywatch dead replay` and the daemon's
// POST /api/v1/queues/<queue>/dead/replay share. Thread-safety: as the client passed (one
// thread at a time per kw_client_t).
#pragma once

#include <cstdint>

#include "keywatch.h"

namespace keywatch::cli {

// Dead letters per replay script call: one call never holds Redis for long.
constexpr int64_t kReplayBatch = 1000;

// Replays the dead letter `entry` of queue (entry null: up to `want` of them, oldest first),
// in batches of at most kReplayBatch, and adds how many were replayed to *count. At most
// `want` are replayed, so that a letter dead again at once (its handler still rejecting) is
// not replayed for ever. The first call is made even when want is 0: it tells an unknown
// queue apart (KW_ERR_NOT_FOUND). Returns the C API's code of the last call.
int replay_dead_letters(kw_client_t *client, const char *queue, const char *entry, int64_t want,
                        int64_t *count);

}  // namespace keywatch::cli
