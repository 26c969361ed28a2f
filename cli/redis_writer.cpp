#include "cli/redis_writer.h"

#include <sys/time.h>

#include "core/redis/url.h"

namespace keywatch::cli {

bool RedisWriter::connect(const std::string &text, std::string *err) {
    RedisUrl url;
    if (!parse_redis_url(text, &url, err)) return false;
    const timeval timeout{5, 0};
    redisContext *c = url.is_unix() ? redisConnectUnixWithTimeout(url.unix_path.c_str(), timeout)
                                    : redisConnectWithTimeout(url.host.c_str(), url.port, timeout);
    ctx_.reset(c);
    if (!c || c->err) {
        *err = "cannot connect to " + url.endpoint() + ": " + (c ? c->errstr : "out of memory");
        return false;
    }
    redisSetTimeout(c, timeout);
    if (!url.password.empty()) {
        std::vector<std::string> auth = {"AUTH"};
        if (!url.user.empty()) auth.push_back(url.user);
        auth.push_back(url.password);
        if (!command(auth, nullptr, err)) return false;
    }
    if (url.db != 0 && !command({"SELECT", std::to_string(url.db)}, nullptr, err)) return false;
    return true;
}

bool RedisWriter::command(const std::vector<std::string> &args, std::string *reply,
                          std::string *err) {
    std::vector<const char *> argv;
    std::vector<size_t> lens;
    for (const auto &a : args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
    }
    auto *r = static_cast<redisReply *>(
        redisCommandArgv(ctx_.get(), static_cast<int>(args.size()), argv.data(), lens.data()));
    if (!r) {
        *err = args[0] + " failed: " + ctx_->errstr;
        return false;
    }
    bool ok = true;
    if (r->type == REDIS_REPLY_ERROR) {
        *err = args[0] + ": " + std::string(r->str, r->len);
        ok = false;
    } else if (reply) {
        if (r->type == REDIS_REPLY_INTEGER)
            *reply = std::to_string(r->integer);
        else if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)
            *reply = std::string(r->str, r->len);
        else
            reply->clear();
    }
    freeReplyObject(r);
    return ok;
}

}  // namespace keywatch::cli
