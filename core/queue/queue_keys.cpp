#include "core/queue/queue_keys.h"

#include "core/queue/reply_ms.h"

namespace keywatch {

namespace {
// "<ns>:<queue>:{<tag>}:", the part every key of one slot queue shares.
std::string queue_base(const std::string &ns, const std::string &queue, const std::string &tag) {
    return ns + ":" + queue + ":{" + tag + "}:";
}
}  // namespace

QueueKeys QueueKeys::make(const std::string &ns, const std::string &queue, const std::string &tag) {
    std::string base = queue_base(ns, queue, tag);
    return {base + "due",  base + "inflight", base + "data", base + "dead",
            base + "done", base + "leases",   base + "seq",  base};
}

std::string QueueKeys::batch_of_member(const std::string &member) const {
    const size_t last = member.rfind(':');
    if (last == std::string::npos || last == 0) return "";
    const size_t mid = member.rfind(':', last - 1);
    if (mid == std::string::npos || mid == 0 || mid + 1 == last) return "";
    return base + "c:" + member.substr(0, last);
}

std::string QueueKeys::due_key(const std::string &ns, const std::string &queue,
                               const std::string &tag) {
    return queue_base(ns, queue, tag) + "due";
}

std::string queue_key_glob(const std::string &ns, const std::string &queue,
                           const std::string &part) {
    return queue_base(ns, queue, "*") + part;
}

std::string dedupe_key(const std::string &ns, const std::string &tag, int db,
                       const std::string &event, const std::string &key) {
    return ns + ":dedupe:{" + tag + "}:" + std::to_string(db) + ":" + event + ":" + key;
}

bool is_keywatch_key(std::string_view ns, std::string_view key) {
    if (key.size() <= ns.size() || key.compare(0, ns.size(), ns) != 0 || key[ns.size()] != ':')
        return false;
    if (key.compare(ns.size(), 8, ":dedupe:") == 0) return true;
    size_t brace = key.find(":{", ns.size() + 1);
    return brace != std::string::npos && key.find("}:", brace) != std::string::npos;
}

bool parse_queue_key(const std::string &ns, const std::string &key, const std::string &part,
                     std::string *queue, std::string *tag) {
    const std::string suffix = "}:" + part;
    if (key.size() < ns.size() + 5 + suffix.size() || key.compare(0, ns.size(), ns) != 0 ||
        key[ns.size()] != ':' ||
        key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0)
        return false;
    size_t open = key.find(":{", ns.size() + 1);
    if (open == std::string::npos || open == ns.size() + 1) return false;
    size_t tag_start = open + 2, tag_end = key.size() - suffix.size();
    if (tag_end <= tag_start) return false;
    *queue = key.substr(ns.size() + 1, open - ns.size() - 1);
    *tag = key.substr(tag_start, tag_end - tag_start);
    return tag->find_first_of("{}") == std::string::npos;
}

bool parse_due_key(const std::string &ns, const std::string &key, std::string *queue,
                   std::string *tag) {
    return parse_queue_key(ns, key, "due", queue, tag);
}

bool valid_queue_name(const std::string &name, std::string *err) {
    if (name.empty() || name.size() > 200 ||
        name.find_first_of("{}: \t\r\n") != std::string::npos) {
        *err = "queue name '" + name +
               "' is not valid: use 1 to 200 characters without '{', '}', ':' or spaces";
        return false;
    }
    return true;
}

bool parse_claimed(const redisReply *flat, size_t i, ClaimedItem *out) {
    if (!flat || flat->type != REDIS_REPLY_ARRAY || flat->elements < (i + 1) * kClaimedFields)
        return false;
    const redisReply *const *f = flat->element + i * kClaimedFields;
    const redisReply *id = f[0], *deadline = f[1], *attempt = f[2], *payload = f[3], *source = f[4];
    if (id->type != REDIS_REPLY_STRING || deadline->type != REDIS_REPLY_INTEGER ||
        attempt->type != REDIS_REPLY_INTEGER || source->type != REDIS_REPLY_STRING ||
        source->len != 1)
        return false;
    out->id.assign(id->str, id->len);
    out->deadline_ms = deadline->integer;
    out->attempt = static_cast<int>(attempt->integer);
    out->has_payload = payload->type == REDIS_REPLY_STRING;
    if (out->has_payload)
        out->payload.assign(payload->str, payload->len);
    else
        out->payload.clear();
    out->source = source->str[0];
    const redisReply *error = f[5];
    if (error->type == REDIS_REPLY_STRING)
        out->last_error.assign(error->str, error->len);
    else
        out->last_error.clear();
    return true;
}

namespace {

bool is_int(const redisReply *r) {
    return r && r->type == REDIS_REPLY_INTEGER;
}
bool is_array(const redisReply *r) {
    return r && r->type == REDIS_REPLY_ARRAY;
}
// A string, or nil (Lua's false): into *out and *has; false for any other type.
bool optional_string(const redisReply *r, std::string *out, bool *has) {
    *has = r->type == REDIS_REPLY_STRING;
    if (*has)
        out->assign(r->str, r->len);
    else
        out->clear();
    return *has || r->type == REDIS_REPLY_NIL;
}

// Flat items of 5: id, deadline, attempt, last error|nil, payload|nil.
bool parse_items(const redisReply *flat, char source, std::vector<ClaimedItem> *out) {
    if (!is_array(flat) || flat->elements % 5 != 0) return false;
    for (size_t i = 0; i < flat->elements; i += 5) {
        const redisReply *const *f = flat->element + i;
        if (f[0]->type != REDIS_REPLY_STRING || !is_int(f[1]) || !is_int(f[2])) return false;
        ClaimedItem item;
        item.id.assign(f[0]->str, f[0]->len);
        item.deadline_ms = f[1]->integer;
        item.attempt = static_cast<int>(f[2]->integer);
        item.source = source;
        bool has_error = false;
        if (!optional_string(f[3], &item.last_error, &has_error) ||
            !optional_string(f[4], &item.payload, &item.has_payload))
            return false;
        out->push_back(std::move(item));
    }
    return true;
}

// The due part: ids, their deadlines as runs (deadline, count, ...), and extras (1-based
// index, attempt, deadline, last error|nil, payload|nil) for retried items and payloads.
bool parse_due_part(const redisReply *ids, const redisReply *runs, const redisReply *extras,
                    std::vector<ClaimedItem> *out, std::string *err) {
    if (!is_array(ids) || !is_array(runs) || runs->elements % 2 != 0 || !is_array(extras) ||
        extras->elements % 5 != 0) {
        *err = "ids, runs or extras are not flat arrays of their width";
        return false;
    }
    size_t first = out->size(), at = 0;
    for (size_t r = 0; r < runs->elements; r += 2) {
        int64_t deadline = 0;
        if (!reply_ms(runs->element[r], &deadline) || !is_int(runs->element[r + 1]) ||
            runs->element[r + 1]->integer < 0 ||
            static_cast<uint64_t>(runs->element[r + 1]->integer) > ids->elements - at) {
            *err = "a run of deadlines is malformed or longer than the ids";
            return false;
        }
        for (int64_t j = 0; j < runs->element[r + 1]->integer; j++, at++) {
            const redisReply *id = ids->element[at];
            if (id->type != REDIS_REPLY_STRING) {
                *err = "an id is not a string";
                return false;
            }
            ClaimedItem item;
            item.id.assign(id->str, id->len);
            item.deadline_ms = deadline;
            out->push_back(std::move(item));
        }
    }
    if (at != ids->elements) {
        *err = "the runs of deadlines do not cover the ids";
        return false;
    }
    for (size_t i = 0; i < extras->elements; i += 5) {
        const redisReply *const *f = extras->element + i;
        if (!is_int(f[0]) || f[0]->integer < 1 ||
            static_cast<uint64_t>(f[0]->integer) > ids->elements || !is_int(f[1]) ||
            !is_int(f[2])) {
            *err = "an extra names no claimed item";
            return false;
        }
        ClaimedItem &item = (*out)[first + static_cast<size_t>(f[0]->integer) - 1];
        item.attempt = static_cast<int>(f[1]->integer);
        item.deadline_ms = f[2]->integer;
        bool has_error = false;
        if (!optional_string(f[3], &item.last_error, &has_error) ||
            !optional_string(f[4], &item.payload, &item.has_payload)) {
            *err = "an extra's error or payload is not a string";
            return false;
        }
    }
    return true;
}

}  // namespace

bool parse_claim_reply(const redisReply *r, ClaimReply *out, std::string *err) {
    *out = ClaimReply{};
    if (!is_array(r) || (r->elements != 12 && r->elements != 13)) {
        *err = "not an array of 12 or 13";
        return false;
    }
    redisReply *const *e = r->element;
    for (int i : {0, 2, 3, 4, 10, 11})
        if (!is_int(e[i])) {
            *err = "field " + std::to_string(i + 1) + " is not an integer";
            return false;
        }
    if (!reply_ms(e[1], &out->next_due)) {
        *err = "field 2 is not a number";
        return false;
    }
    out->now = e[0]->integer;
    out->next_lease = e[2]->integer;
    out->live = e[3]->integer;
    out->b = e[4]->integer;
    out->untracked = e[10]->integer;
    out->moved = e[11]->integer;
    if (r->elements == 13) {
        if (!is_int(e[12])) {
            *err = "field 13 is not an integer";
            return false;
        }
        out->listeners = e[12]->integer;
    }
    if (!parse_due_part(e[5], e[6], e[8], &out->items, err)) return false;
    if (!parse_items(e[7], 'L', &out->items)) {
        *err = "the reclaimed items are malformed";
        return false;
    }
    if (!is_array(e[9])) {
        *err = "the stale members are not an array";
        return false;
    }
    for (size_t i = 0; i < e[9]->elements; i++) {
        if (e[9]->element[i]->type != REDIS_REPLY_STRING) {
            *err = "a stale member is not a string";
            return false;
        }
        out->stale.emplace_back(e[9]->element[i]->str, e[9]->element[i]->len);
    }
    return true;
}

bool parse_live_claim_reply(const redisReply *r, LiveClaimReply *out, std::string *err) {
    *out = LiveClaimReply{};
    if (!is_array(r) || (r->elements != 4 && r->elements != 5) || !is_int(r->element[0]) ||
        !is_array(r->element[1]) || !is_int(r->element[3]) ||
        (r->elements == 5 && !is_int(r->element[4]))) {
        *err = "not {now, letters, items, b[, listeners]}";
        return false;
    }
    out->now = r->element[0]->integer;
    out->b = r->element[3]->integer;
    if (r->elements == 5) out->listeners = r->element[4]->integer;
    for (size_t i = 0; i < r->element[1]->elements; i++) {
        const redisReply *l = r->element[1]->element[i];
        if (l->type != REDIS_REPLY_STRING || l->len != 1) {
            *err = "an answer is not one letter";
            return false;
        }
        out->letters.push_back(l->str[0]);
    }
    if (!parse_items(r->element[2], 'N', &out->items)) {
        *err = "the claimed items are malformed";
        return false;
    }
    return true;
}

}  // namespace keywatch
