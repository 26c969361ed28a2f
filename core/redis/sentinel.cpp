#include "core/redis/sentinel.h"

#include <algorithm>
#include <chrono>

#include "core/redis/blocking_redis.h"
#include "keywatch_types.h"

namespace keywatch {

std::vector<std::string> master_addr_command(const RedisUrl &url) {
    return {"SENTINEL", "get-master-addr-by-name", url.master_name};
}

bool parse_master_addr(const redisReply *r, const RedisUrl &url, Endpoint *out, std::string *why) {
    if (!r || r->type == REDIS_REPLY_NIL) {
        *why = "knows no master named '" + url.master_name + "' (check the name in the URL)";
        return false;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        *why = "answered " + std::string(r->str, r->len) + " (is it a sentinel?)";
        return false;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING) {
        *why = "gave an address that is not [ip, port]";
        return false;
    }
    const std::string host(r->element[0]->str, r->element[0]->len);
    const std::string port(r->element[1]->str, r->element[1]->len);
    auto e = Endpoint::parse(host + ":" + port, Endpoint::Form::Redis, why);
    if (!e || e->port == 0) {
        *why = "gave the address " + host + ":" + port + " that is not host:port";
        return false;
    }
    *out = *e;
    return true;
}

std::string role_of(const redisReply *r) {
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements == 0 ||
        r->element[0]->type != REDIS_REPLY_STRING)
        return "";
    return std::string(r->element[0]->str, r->element[0]->len);
}

bool is_switch_of(const std::string &payload, const RedisUrl &url) {
    return payload.compare(0, url.master_name.size() + 1, url.master_name + " ") == 0;
}

int ask_sentinel(const RedisUrl &url, size_t i, int64_t timeout_ms, Endpoint *master,
                 std::string *why) {
    BlockingRedis s(url.sentinel_at(i), "sentinel", false);
    if (int rc = s.connect(timeout_ms); rc != KW_OK) {
        *why = rc == KW_ERR_AUTH ? s.error() +
                                       " (the sentinels' own credentials are "
                                       "sentinel.username and sentinel.password)"
                                 : s.error();
        return rc;
    }
    ReplyPtr r = s.command(master_addr_command(url), timeout_ms);
    if (!r) {
        *why = s.error();
        return s.status();
    }
    return parse_master_addr(r.get(), url, master, why) ? KW_OK : KW_ERR_REDIS;
}

namespace {

// One sentinel asked, and the address it named confirmed: KW_OK with *found, or a status
// with *why (what it said).
int ask_one(const RedisUrl &url, size_t i, int64_t timeout_ms, FoundMaster *found,
            std::string *why) {
    const RedisUrl at = url.sentinel_at(i);
    Endpoint addr;
    if (int rc = ask_sentinel(url, i, timeout_ms, &addr, why); rc != KW_OK) return rc;
    BlockingRedis m(url.at(addr), "sentinel", false);
    if (int rc = m.connect(timeout_ms); rc != KW_OK) {
        *why = "names " + addr.str() + " as the master, which does not answer: " + m.error();
        return rc == KW_ERR_AUTH ? rc : KW_ERR_CONNECT;
    }
    ReplyPtr role = m.command({"ROLE"}, timeout_ms);
    if (role_of(role.get()) != "master") {
        *why = "names " + addr.str() + " as the master, but it is " +
               (role ? "a " + role_of(role.get()) + " (a stale view; a failover in progress?)"
                     : "not answering ROLE: " + m.error());
        return KW_ERR_REDIS;
    }
    found->url = url.at(addr);
    found->sentinel = at.endpoint();
    return KW_OK;
}

}  // namespace

int find_master(const RedisUrl &url, int64_t timeout_ms, FoundMaster *found, std::string *err) {
    using Clock = std::chrono::steady_clock;
    const auto deadline =
        Clock::now() + std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 1));
    std::string all;
    int rc = KW_ERR_CONNECT;
    for (size_t i = 0; i < url.sentinels.size(); i++) {
        const int64_t left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) break;
        std::string why;
        rc = ask_one(url, i, left, found, &why);
        if (rc == KW_OK) return KW_OK;
        all += (all.empty() ? "" : "; ") + std::string("sentinel ") +
               url.sentinel_at(i).endpoint() + ": " + why;
        if (rc == KW_ERR_AUTH && why.find("sentinel.") == std::string::npos) {
            *err = why;
            return rc;
        }
    }
    *err = "no sentinel gave a working master for '" + url.master_name + "': " + all;
    return rc == KW_ERR_AUTH ? KW_ERR_AUTH : (rc == KW_ERR_TIMEOUT ? rc : KW_ERR_CONNECT);
}

}  // namespace keywatch
