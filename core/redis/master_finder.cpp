#include "core/redis/master_finder.h"

namespace keywatch {

MasterFinder::MasterFinder(event_base *base, RedisUrl url, int64_t timeout_ms, Backoff backoff,
                           LogFn log)
    : base_(base),
      url_(std::move(url)),
      timeout_ms_(timeout_ms),
      backoff_(backoff),
      log_(std::move(log)),
      ask_timer_(base, [this] { ask(next_); }),
      confirm_timer_(base, [this] { confirm(next_); }),
      watch_timer_(base, [this] { subscribe(); }) {}

MasterFinder::~MasterFinder() {
    close();
}

void MasterFinder::close() {
    searching_ = false;
    ask_timer_.cancel();
    confirm_timer_.cancel();
    watch_timer_.cancel();
    on_switch_ = nullptr;
    for (auto *c : {&sentinel_, &master_, &watch_})
        if (*c) (*c)->close();
}

void MasterFinder::find(Found found) {
    found_ = std::move(found);
    if (searching_) return;
    searching_ = true;
    next_ = 0;
    passed_over_.clear();
    ask_timer_.arm(0);
}

void MasterFinder::ask(size_t i) {
    sentinel_ = std::make_unique<RedisConn>(base_, url_.sentinel_at(i), "sentinel");
    RedisConn *c = sentinel_.get();
    c->connect(
        timeout_ms_,
        [this, c, i] {
            c->command(master_addr_command(url_), [this, c, i](redisReply *r) {
                std::string why;
                const bool named = parse_master_addr(r, url_, &named_, &why);
                c->close();
                if (!named) return passed(i, why);
                confirm_timer_.arm(0);
            });
        },
        [this, i](const RedisConn::Failure &f) { passed(i, f.message); });
}

void MasterFinder::confirm(size_t i) {
    master_ = std::make_unique<RedisConn>(base_, url_.at(named_), "sentinel");
    RedisConn *c = master_.get();
    const std::string named = named_.str();
    c->connect(
        timeout_ms_,
        [this, c, i, named] {
            c->command({"ROLE"}, [this, c, i, named](redisReply *r) {
                const std::string role = role_of(r);
                c->close();
                if (role != "master")
                    return passed(i, "names " + named + " as the master, but it is a " + role +
                                         " (a stale view; a failover in progress?)");
                searching_ = false;
                round_ = 0;
                FoundMaster f{url_.at(named_), url_.sentinel_at(i).endpoint()};
                Found done = found_;
                done(f);
            });
        },
        [this, i, named](const RedisConn::Failure &f) {
            passed(i, "names " + named + " as the master, which does not answer: " + f.message);
        });
}

void MasterFinder::passed(size_t i, const std::string &why) {
    passed_over_ += (passed_over_.empty() ? "" : "; ") + std::string("sentinel ") +
                    url_.sentinel_at(i).endpoint() + ": " + why;
    next_ = i + 1;
    if (next_ < url_.sentinels.size()) {
        ask_timer_.arm(0);
        return;
    }
    // A round without a master: again from the first sentinel after a backoff.
    const int64_t delay = backoff_.delay(round_++);
    log_(KW_LOG_WARN,
         "sentinel: no sentinel gave a working master for '" + url_.master_name + "' (" +
             passed_over_ + "); asking again in " + std::to_string(delay) + "ms",
         {});
    next_ = 0;
    passed_over_.clear();
    ask_timer_.arm(delay);
}

void MasterFinder::watch_switches(std::function<void()> on_switch) {
    on_switch_ = std::move(on_switch);
    watch_at_ = 0;
    watch_timer_.arm(0);
}

void MasterFinder::subscribe() {
    if (!on_switch_) return;
    watch_ = std::make_unique<RedisConn>(base_, url_.sentinel_at(watch_at_), "sentinel-watch");
    RedisConn *c = watch_.get();
    c->set_push_handler([this](redisReply *r) {
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 3) return;
        const redisReply *kind = r->element[0], *payload = r->element[2];
        if (kind->type != REDIS_REPLY_STRING || std::string(kind->str, kind->len) != "message")
            return;
        const std::string text(payload->str, payload->len);
        if (!is_switch_of(text, url_) || !on_switch_) return;
        log_(KW_LOG_INFO, "sentinel " + watch_->endpoint() + ": +switch-master " + text, {});
        on_switch_();
    });
    c->connect(
        timeout_ms_,
        [this, c] {
            watch_round_ = 0;
            c->subscribe({"SUBSCRIBE", "+switch-master"});
        },
        [this](const RedisConn::Failure &) {
            // The next sentinel, at once while there are others; a backoff after a round.
            watch_at_ = (watch_at_ + 1) % url_.sentinels.size();
            watch_timer_.arm(watch_at_ == 0 ? backoff_.delay(watch_round_++) : 0);
        });
}

}  // namespace keywatch
