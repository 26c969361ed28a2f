// V1Engines: engines of the earlier version on a node (see v1_engines.h). Loop thread only.
#include "core/sweeper/v1_engines.h"

#include "core/redis/channel.h"
#include "core/redis/reply_text.h"

namespace keywatch {

V1Engines::V1Engines(EventLoop &loop, int64_t interval_ms, NodeLink &link,
                     std::function<void(kw_log_level, const std::string &)> log)
    : interval_ms_(interval_ms),
      link_(link),
      log_(std::move(log)),
      timer_(loop.base(), [this] { ask(); }) {}

void V1Engines::connected(std::function<void()> answered) {
    ask(std::move(answered));
}

void V1Engines::lost() {
    present_ = true;
    timer_.cancel();
}

void V1Engines::stop() {
    timer_.cancel();
}

void V1Engines::ask(std::function<void()> answered) {
    timer_.arm(interval_ms_);
    if (!link_.ready()) return;
    link_.command({"PUBSUB", "CHANNELS", kV1HeartbeatGlob}, [this, answered](redisReply *r) {
        struct Then {
            const std::function<void()> &fn;
            ~Then() {
                if (fn) fn();
            }
        } then{answered};
        if (r && r->type == REDIS_REPLY_ARRAY) {
            present_ = r->elements > 0;
            return;
        }
        present_ = false;
        if (refusal_said_) return;
        refusal_said_ = true;
        log_(KW_LOG_WARN,
             "cannot look for engines of an earlier keywatch version on " + link_.endpoint() +
                 " (PUBSUB CHANNELS: " + reply_to_string(r) +
                 "): claims count only engines of this version; grant +pubsub|channels, or set "
                 "queue.done_mode=always while such engines run");
    });
}

}  // namespace keywatch
