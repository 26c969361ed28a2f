#include "cli/dead_replay.h"

#include <algorithm>

namespace keywatch::cli {

int replay_dead_letters(kw_client_t *client, const char *queue, const char *entry, int64_t want,
                        int64_t *count) {
    if (entry) want = 1;
    int64_t done = 0;
    int rc = KW_OK;
    do {
        const int64_t batch = std::max<int64_t>(1, std::min<int64_t>(want - done, kReplayBatch));
        int64_t n = 0;
        rc = kw_client_dead_replay(client, queue, entry, static_cast<size_t>(batch), &n);
        if (rc != KW_OK) break;
        done += n;
        if (n < batch) break;  // the stream ran out
    } while (done < want);
    *count += done;
    return rc;
}

}  // namespace keywatch::cli
