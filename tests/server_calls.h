// What commands a redis-server ran, for tests of the plugins that batch: how often it ran a
// command (INFO commandstats), and which script calls touched a key with how many keys
// each (its slowlog: with slowlog-log-slower-than 0 every command is logged with its first
// arguments; commandstats cannot tell a plugin's scripts from the engine's).
// Thread-safety: none needed; each call opens its own connection.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace kwtest {

class ServerCalls {
  public:
    ServerCalls(std::string host, int port) : host_(std::move(host)), port_(port) {}

    // Counts and logs every command from now on (and forgets what was counted before).
    void start() {
        run({"CONFIG", "SET", "slowlog-log-slower-than", "0"});
        run({"CONFIG", "SET", "slowlog-max-len", "1000000"});
        run({"SLOWLOG", "RESET"});
        run({"CONFIG", "RESETSTAT"});
    }
    // How many times `cmd` (lower case, as commandstats names it) ran, failed runs included.
    int64_t calls(const std::string &cmd) { return stat(cmd, "calls"); }
    // How many times `cmd` was refused before it ran (a cluster redirect: MOVED, ASK).
    int64_t rejected(const std::string &cmd) { return stat(cmd, "rejected_calls"); }
    // For each EVALSHA logged whose first key is `key`: its number of keys, in order. An
    // EVALSHA answered NOSCRIPT is followed by an EVAL of the same call, not listed here.
    std::vector<int64_t> numkeys(const std::string &key) { return logged("EVALSHA", key); }
    // How many times the body of a script whose first key is `key` was sent (EVAL).
    size_t bodies(const std::string &key) { return logged("EVAL", key).size(); }

  private:
    // The number of keys of each `command` (EVAL or EVALSHA) logged with first key `key`.
    std::vector<int64_t> logged(const std::string &command, const std::string &key) {
        std::vector<int64_t> out;
        auto r = run({"SLOWLOG", "GET", "-1"});
        for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
            const redisReply *entry = r->element[i];
            if (entry->type != REDIS_REPLY_ARRAY || entry->elements < 4) continue;
            const redisReply *argv = entry->element[3];
            if (argv->type != REDIS_REPLY_ARRAY || argv->elements < 4) continue;
            std::string cmd(argv->element[0]->str, argv->element[0]->len);
            for (auto &c : cmd) c = static_cast<char>(toupper(c));
            if (cmd == command && std::string(argv->element[3]->str, argv->element[3]->len) == key)
                out.insert(out.begin(), std::stoll(argv->element[2]->str));  // newest first
        }
        return out;
    }

    // A field of cmd's line in INFO commandstats (0 when the server never ran cmd).
    int64_t stat(const std::string &cmd, const std::string &field) {
        auto r = run({"INFO", "commandstats"});
        std::string info(r->str, r->len), line = "cmdstat_" + cmd + ":";
        size_t p = info.find(line);
        if (p == std::string::npos) return 0;
        std::string fields = info.substr(p + line.size(), info.find('\r', p) - p - line.size());
        size_t f = ("," + fields).find("," + field + "=");
        return f == std::string::npos ? 0 : std::stoll(fields.substr(f + field.size() + 1));
    }
    using Reply = std::unique_ptr<redisReply, decltype(&freeReplyObject)>;
    Reply run(const std::vector<std::string> &args) {
        std::unique_ptr<redisContext, decltype(&redisFree)> c(redisConnect(host_.c_str(), port_),
                                                              &redisFree);
        if (!c || c->err) throw std::runtime_error("cannot connect to " + host_);
        std::vector<const char *> argv;
        std::vector<size_t> lens;
        for (const auto &a : args) argv.push_back(a.data()), lens.push_back(a.size());
        Reply r(static_cast<redisReply *>(redisCommandArgv(c.get(), static_cast<int>(args.size()),
                                                           argv.data(), lens.data())),
                &freeReplyObject);
        if (!r || r->type == REDIS_REPLY_ERROR)
            throw std::runtime_error(args[0] + " failed on " + host_ + ": " +
                                     (r ? r->str : c->errstr));
        return r;
    }
    std::string host_;
    int port_;
};

// The events in a list of script calls (each call: numkeys = 1 stream + one marker per event).
inline int64_t events_in(const std::vector<int64_t> &numkeys) {
    int64_t n = 0;
    for (int64_t k : numkeys) n += k - 1;
    return n;
}

}  // namespace kwtest
