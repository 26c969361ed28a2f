// Client: the blocking producer/admin side (track, schedule, inspect, dead letters) over
// one synchronous hiredis connection. Scripts go by EVALSHA, falling back to EVAL on
// NOSCRIPT (a restarted or failed-over server has an empty script cache).
// Not thread-safe: one client per thread.
#pragma once

#include <hiredis/hiredis.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/queue.h"
#include "core/scripts.h"

namespace keywatch {

struct ReplyDeleter {
    void operator()(redisReply *r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

class Client {
  public:
    explicit Client(Config config);
    ~Client();
    Client(const Client &) = delete;
    Client &operator=(const Client &) = delete;

    int connect();  // also done lazily by every call

    int track(const std::string &key, const std::string &value, int64_t ttl_ms, int flags,
              int64_t *deadline);
    int untrack(const std::string &key, bool delete_key);
    int adopt(const std::string &key, int flags, int64_t *deadline);
    int schedule(const std::string &queue, const std::string &id, const std::string &payload,
                 int64_t at_ms, int64_t delay_ms, int flags, int64_t *at_out);
    int cancel(const std::string &queue, const std::string &id);
    int reschedule(const std::string &queue, const std::string &id, int64_t at_ms, int64_t delay_ms,
                   int64_t *at_out);

    int pipeline_begin();
    int pipeline_end(std::vector<int> *statuses);

    int inspect_json(std::string *json);
    int dead_list_json(const std::string &queue, size_t limit, std::string *json);
    int dead_replay(const std::string &queue, const std::string &entry, size_t limit,
                    int64_t *count);
    int dead_purge(const std::string &queue, const std::string &entry, int64_t *count);

    const std::string &last_error() const { return error_; }

  private:
    // How a script's reply becomes a status (and outputs).
    using Decode = std::function<int(const redisReply *)>;

    int fail(int status, const std::string &msg);
    int check_key(const std::string &key);
    int check_value(const std::string &value, const char *what);
    int check_queue(const std::string &queue);
    // Runs (or, in a pipeline, queues) a script on a queue's keys.
    int run(const Script &s, const QueueKeys &q, const std::string *key,
            const std::vector<std::string> &argv, Decode decode);
    ReplyPtr call(const std::vector<std::string> &args);
    ReplyPtr eval(const Script &s, const QueueKeys &q, const std::string *key,
                  const std::vector<std::string> &argv);
    std::vector<std::string> eval_args(const Script &s, bool by_sha, const QueueKeys &q,
                                       const std::string *key,
                                       const std::vector<std::string> &argv) const;
    QueueKeys queue(const std::string &name) const;
    std::vector<std::string> known_queues();

    Config config_;
    redisContext *ctx_ = nullptr;
    int call_status_ = 0;  // status of the last call() that returned null
    std::string error_;
    struct Pending {
        const Script *script;
        QueueKeys q;
        bool has_key;
        std::string key;
        std::vector<std::string> argv;
        Decode decode;
    };
    bool pipelining_ = false;
    std::vector<Pending> pipeline_;
};

}  // namespace keywatch
