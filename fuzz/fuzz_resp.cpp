// Fuzz target: RESP replies the engine interprets, read by hiredis' own reader as on a
// connection: CLUSTER SHARDS and CLUSTER SLOTS (topology), CONFIG GET
// notify-keyspace-events, and the claim scripts' flat item arrays.
// Properties: a refused topology says why; an accepted one names only masters that exist,
// each with a host and a port, and counts its uncovered slots right; the notify flags that
// a server lacks, once added, leave nothing missing; claimed items keep their id bytes.
#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/queue/queue_keys.h"
#include "core/redis/redis_conn.h"
#include "core/redis/reply_error.h"
#include "core/redis/keyspace_events.h"
#include "core/redis/topology.h"
#include "fuzz/check.h"

namespace {

void check_topology(const keywatch::Topology &t) {
    size_t uncovered = 0;
    for (int slot = 0; slot < 16384; slot++) {
        const int owner = t.slot_owner[slot];
        KW_FUZZ_CHECK(owner >= -1 && owner < static_cast<int>(t.masters.size()),
                      "a slot's owner is a listed master");
        uncovered += owner < 0;
        KW_FUZZ_CHECK((t.master_for_slot(slot) == nullptr) == (owner < 0),
                      "master_for_slot agrees with the table");
    }
    KW_FUZZ_CHECK(uncovered == t.uncovered(), "uncovered() counts the slots without a master");
    for (const auto &m : t.masters) {
        KW_FUZZ_CHECK(!m.host.empty(), "a master has a host");
        KW_FUZZ_CHECK(m.port > 0 && m.port < 65536, "a master's port is in 1..65535");
        KW_FUZZ_CHECK(t.find(m.endpoint()) >= 0, "a master is found by its endpoint");
    }
}

void check_reply(const redisReply *r) {
    (void)keywatch::reply_to_string(r);
    const keywatch::ReplyError kind = keywatch::classify(r);
    KW_FUZZ_CHECK((kind == keywatch::ReplyError::None) == (r->type != REDIS_REPLY_ERROR),
                  "exactly the error replies are classified as errors");
    if (!keywatch::redirect_target(r).empty())
        KW_FUZZ_CHECK(kind == keywatch::ReplyError::Moved || kind == keywatch::ReplyError::Ask,
                      "only MOVED and ASK name a node");
    std::string err;
    keywatch::Topology t;
    for (bool tls : {false, true}) {
        err.clear();
        if (keywatch::parse_cluster_shards(r, "127.0.0.1", &t, &err, tls))
            check_topology(t);
        else
            KW_FUZZ_CHECK(!err.empty(), "a refused CLUSTER SHARDS reply says why");
    }
    err.clear();
    keywatch::Topology s;
    if (keywatch::parse_cluster_slots(r, "127.0.0.1", &s, &err))
        check_topology(s);
    else
        KW_FUZZ_CHECK(!err.empty(), "a refused CLUSTER SLOTS reply says why");

    std::string have;
    if (keywatch::notify_flags_from_reply(r, &have)) {
        const std::string need = "Exe$d";
        const std::string missing = keywatch::missing_notify_flags(have, need);
        for (char c : missing)
            KW_FUZZ_CHECK(need.find(c) != std::string::npos, "only needed flags");
        KW_FUZZ_CHECK(keywatch::missing_notify_flags(have + missing, need).empty(),
                      "adding the missing flags leaves none missing");
    }

    if (r->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < r->elements / keywatch::kClaimedFields; i++) {
            keywatch::ClaimedItem item;
            if (!keywatch::parse_claimed(r, i, &item)) continue;
            const redisReply *id = r->element[i * keywatch::kClaimedFields];
            KW_FUZZ_CHECK(item.id == std::string(id->str, id->len), "the id's bytes are kept");
        }
    }
}

// hiredis 0.14's reader allocates an array's declared element count before reading any
// element: "*999999999" asks malloc for 8 GB (found by this target). That is hiredis', not
// keywatch's parsing; the target skips such inputs so that it keeps finding ours. (The
// connection layer that owns its socket I/O is the place to bound it.)
bool declares_huge_array(const uint8_t *data, size_t size) {
    for (size_t i = 0; i < size; i++) {
        if (data[i] != '*' || (i > 0 && data[i - 1] != '\n')) continue;
        uint64_t n = 0;
        for (size_t j = i + 1; j < size && data[j] >= '0' && data[j] <= '9' && n <= 100000; j++)
            n = n * 10 + (data[j] - '0');
        if (n > 100000) return true;
    }
    return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (declares_huge_array(data, size)) return 0;
    redisReader *reader = redisReaderCreate();
    KW_FUZZ_CHECK(reader != nullptr, "a reader");
    redisReaderFeed(reader, reinterpret_cast<const char *>(data), size);
    for (int replies = 0; replies < 16; replies++) {
        void *reply = nullptr;
        if (redisReaderGetReply(reader, &reply) != REDIS_OK || reply == nullptr) break;
        check_reply(static_cast<redisReply *>(reply));
        freeReplyObject(reply);
    }
    redisReaderFree(reader);
    return 0;
}
