// AdoptScan: see adopt_scan.h.
// Loop thread only.
#include "core/sweeper/adopt_scan.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "core/redis/reply_error.h"
#include "core/redis/reply_text.h"

namespace keywatch {
namespace {

int64_t steady_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

std::string seconds_text(double s) {
    char buf[32];
    snprintf(buf, sizeof buf, s < 10 ? "%.1f" : "%.0f", s);
    return buf;
}

}  // namespace

std::string every_key_warning(const AdoptRule &rule, size_t rule_index, int db,
                              const std::string &node, int64_t dbsize, int64_t rate) {
    const std::string d = std::to_string(db);
    return "adopt rule " + std::to_string(rule_index + 1) + " (" + rule.describe() +
           ") matches every key of db " + d + ": the catch-up scan of " + node + " reads all " +
           std::to_string(dbsize) + " keys (about " +
           seconds_text(static_cast<double>(dbsize) / static_cast<double>(rate)) +
           " s at catchup.rate=" + std::to_string(rate) +
           "/s; about 2.3 \xC2\xB5s of Redis CPU per key, since no MATCH can narrow it), and "
           "every set/expire event of db " +
           d + " is looked at; give the rule a prefix if only some keys are meant";
}

AdoptScan::AdoptScan(EventLoop &loop, Options opts, NodeLink &link, Adopt adopt, Log log)
    : opts_(std::move(opts)),
      link_(link),
      adopt_(std::move(adopt)),
      log_(std::move(log)),
      timer_(loop.base(), [this] { next(); }),
      matches_(opts_.rules ? opts_.rules->scan_matches() : std::vector<std::string>{}) {}

std::string AdoptScan::node() const {
    return opts_.node_name ? *opts_.node_name : link_.endpoint();
}

void AdoptScan::request(const std::string &reason) {
    if (stopped_ || !opts_.enable || !opts_.rules || opts_.rules->empty()) return;
    if (!pending_) reason_ = started_once_ ? reason : opts_.first_reason;
    pending_ = true;
    poke();
}

void AdoptScan::poke() {
    if (stopped_ || !pending_ || !link_.serving()) return;
    if (opts_.subscribed && !opts_.subscribed()) return;
    begin();
}

void AdoptScan::connection_lost() {
    if (!running_) return;
    // Restarted from the beginning when the connection serves again (Sweeper::resume).
    gen_++;
    running_ = false;
    timer_.cancel();
    if (!pending_) reason_ = "sweeper reconnected";
    pending_ = true;
}

void AdoptScan::stop() {
    stopped_ = true;
    gen_++;
    timer_.cancel();
    if (running_) {
        running_ = false;
        if (opts_.node_stats) opts_.node_stats->catchup_scanning.store(0);
    }
}

void AdoptScan::begin() {
    pending_ = false;
    started_once_ = true;
    gen_++;
    running_ = true;
    timer_.cancel();
    pass_ = 0;
    cursor_ = "0";
    calls_ = 0;
    matched_ = adopted_ = tracked_ = 0;
    failures_ = 0;
    adopts_in_flight_ = 0;
    held_ = ending_ = false;
    started_us_ = logged_us_ = steady_us();
    next_send_us_ = 0;
    if (opts_.node_stats) opts_.node_stats->catchup_scanning.store(1);
    set_progress(0);
    const uint64_t gen = gen_;
    bool sent = link_.command({"DBSIZE"}, [this, gen](redisReply *r) {
        if (gen == gen_) on_dbsize(r);
    });
    if (!sent) connection_lost();
}

void AdoptScan::on_dbsize(redisReply *r) {
    // Without DBSIZE (an ACL refusing it) progress stays at 0 until the end.
    dbsize_ = r && r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
    log_(KW_LOG_INFO, "adopt: catch-up scan of " + node() + " started (" + reason_ + "): about " +
                          std::to_string(dbsize_) + " keys, " + match_text());
    const int every = opts_.rules->scans_everything();
    if (every >= 0)
        log_(KW_LOG_WARN, every_key_warning(opts_.rules->rules()[every], every, opts_.db, node(),
                                            dbsize_, opts_.rate));
    reason_.clear();
    next();
}

std::string AdoptScan::match_text() const {
    std::string out;
    for (const std::string &m : matches_) {
        if (m.empty()) return "no MATCH (every key is read)";
        out += (out.empty() ? "MATCH \"" : ", \"") + m + "\"";
    }
    return out;
}

void AdoptScan::next() {
    if (!running_) return;
    const int64_t now = steady_us();
    if (now < next_send_us_) {
        timer_.arm((next_send_us_ - now + 999) / 1000);
        return;
    }
    // A call of catchup.count keys every count/rate seconds on average. The schedule, not
    // the moment a call leaves, sets the next one, so that a late timer or a slow reply
    // does not slow the scan down; at most one call's worth is made up at once.
    const int64_t interval = opts_.count * 1000000 / opts_.rate;
    next_send_us_ = std::max(next_send_us_, now - interval) + interval;
    send();
}

void AdoptScan::send() {
    std::vector<std::string> args = {"SCAN", cursor_};
    if (!matches_[pass_].empty()) {
        args.push_back("MATCH");
        args.push_back(matches_[pass_]);
    }
    args.push_back("COUNT");
    args.push_back(std::to_string(opts_.count));
    const uint64_t gen = gen_;
    if (!link_.command(args, [this, gen](redisReply *r) { on_scan(gen, r); })) connection_lost();
}

void AdoptScan::on_scan(uint64_t gen, redisReply *r) {
    if (gen != gen_) return;
    if (classify(r) == ReplyError::Loading) {
        // The server restarted under us: everything waits, then the scan begins again.
        link_.server_waits(ReplyError::Loading);
        connection_lost();
        return;
    }
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY) {
        failed("SCAN", r);
        return;
    }
    failures_ = 0;
    calls_++;
    cursor_.assign(r->element[0]->str, r->element[0]->len);
    std::vector<AdoptKey> keys;
    for (size_t i = 0; i < r->element[1]->elements; i++) {
        const redisReply *k = r->element[1]->element[i];
        std::string key(k->str, k->len);
        int rule = opts_.rules->match(key);
        if (rule >= 0) keys.push_back({std::move(key), rule, -1, /*from_event=*/false});
    }
    matched_ += static_cast<int64_t>(keys.size());
    if (opts_.counters) opts_.counters->keys.fetch_add(static_cast<int64_t>(keys.size()));
    if (dbsize_ > 0) {
        const int64_t passes = static_cast<int64_t>(matches_.size());
        const int64_t seen = static_cast<int64_t>(pass_) * dbsize_ + calls_ * opts_.count;
        set_progress(std::min<int64_t>(999, seen * 1000 / (passes * dbsize_)));
    }
    if (steady_us() - logged_us_ >= kProgressLogMs * 1000) log_progress();
    if (!keys.empty()) {
        adopts_in_flight_++;
        adopt_(std::move(keys), [this, gen](const AdoptTally &t) { on_answered(gen, t); });
    }
    if (gen == gen_ && running_) advance();
}

void AdoptScan::advance() {
    // The next SCAN goes out behind this one's adoptions, on the same connection: Redis
    // answers them first, so at most kMaxAdoptsInFlight calls' adoptions wait.
    if (adopts_in_flight_ >= kMaxAdoptsInFlight) {
        held_ = true;
        return;
    }
    if (cursor_ != "0") {
        next();
        return;
    }
    if (++pass_ < matches_.size()) {
        calls_ = 0;
        next();
        return;
    }
    ending_ = true;  // every key is read: done once every adoption is answered
    if (adopts_in_flight_ == 0) finish();
}

void AdoptScan::on_answered(uint64_t gen, const AdoptTally &t) {
    if (gen != gen_ || !running_) return;
    adopted_ += t.adopted;
    tracked_ += t.tracked;
    adopts_in_flight_--;
    if (held_) {
        held_ = false;
        advance();
    } else if (ending_ && adopts_in_flight_ == 0) {
        finish();
    }
}

void AdoptScan::failed(const std::string &what, redisReply *r) {
    const int64_t delay = opts_.retry.jittered(failures_, std::random_device{}());
    if (failures_++ == 0)
        log_(KW_LOG_WARN, "adopt: catch-up scan of " + node() + ": " + what +
                              " failed: " + reply_to_string(r) +
                              "; tried again from the same "
                              "cursor, backing off");
    next_send_us_ = steady_us() + delay * 1000;
    timer_.arm(delay);
}

void AdoptScan::finish() {
    running_ = false;
    set_progress(1000);
    if (opts_.node_stats) opts_.node_stats->catchup_scanning.store(0);
    if (opts_.counters) opts_.counters->scans.fetch_add(1);
    const double secs = static_cast<double>(steady_us() - started_us_) / 1e6;
    log_(KW_LOG_INFO, "adopt: catch-up scan of " + node() + " done in " + seconds_text(secs) +
                          " s: " + std::to_string(dbsize_) + " keys, " + std::to_string(matched_) +
                          " matched, " + std::to_string(adopted_) + " adopted, " +
                          std::to_string(tracked_) + " already tracked");
    // A reason that came while it ran was folded into it (the scan restarts on a new one).
    poke();
}

void AdoptScan::set_progress(int64_t permille) {
    if (opts_.node_stats) opts_.node_stats->catchup_progress.store(permille);
}

void AdoptScan::log_progress() {
    logged_us_ = steady_us();
    const int64_t passes = static_cast<int64_t>(matches_.size());
    const int64_t seen =
        std::min(dbsize_ * passes, static_cast<int64_t>(pass_) * dbsize_ + calls_ * opts_.count);
    const int64_t pct = dbsize_ > 0 ? std::min<int64_t>(99, seen * 100 / (passes * dbsize_)) : 0;
    log_(KW_LOG_INFO, "adopt: catch-up scan of " + node() + ": ~" + std::to_string(pct) +
                          "% (about " + std::to_string(seen) + " of " +
                          std::to_string(dbsize_ * passes) + " keys), " + std::to_string(adopted_) +
                          " adopted");
}

}  // namespace keywatch
