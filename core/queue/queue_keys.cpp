#include "core/queue/queue_keys.h"

namespace keywatch {

namespace {
// "<ns>:<queue>:{<tag>}:", the part every key of one slot queue shares.
std::string queue_base(const std::string &ns, const std::string &queue, const std::string &tag) {
    return ns + ":" + queue + ":{" + tag + "}:";
}
}  // namespace

QueueKeys QueueKeys::make(const std::string &ns, const std::string &queue, const std::string &tag) {
    std::string base = queue_base(ns, queue, tag);
    return {base + "due", base + "inflight", base + "data", base + "dead", base + "done"};
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

}  // namespace keywatch
