// Sweeper, 1 of 3: construction (the parts and what each is given), start and stop, and
// the connection's hooks (resume, on_lost). The others: sweeper_due.cpp, sweeper_live.cpp;
// the parts in slot_queues.h, node_link.h, lease_renewal.h, completion_batches.h and
// cluster_arrivals.h.
// Loop thread only.
#include "core/sweeper/sweeper.h"

#include <algorithm>

#include "core/redis/reply_error.h"
#include "core/redis/slots.h"

namespace keywatch {

Sweeper::Sweeper(EventLoop &loop, RedisUrl url, Options opts, SweeperSink *sink,
                 SweeperCounters *counters)
    : opts_(std::move(opts)),
      sink_(sink),
      counters_(counters),
      link_(
          loop, url, opts_.connect_timeout_ms, opts_.reconnect,
          {[this] { resume(); }, [this] { on_lost(); }, [this] { set_sweeping(false); },
           [this](int64_t delay) { return completions_.within_leases(delay); }, opts_.on_connected,
           [this](kw_log_level level, const std::string &message) { log(level, message); },
           opts_.on_readonly}),
      queues_(
          loop,
          {opts_.ns, opts_.tag, opts_.cluster, opts_.track_keys, opts_.task_queues, opts_.stats},
          [this](Queue &q) { sweep(q); }),
      leases_(
          loop, {opts_.owner, opts_.lease_ms, opts_.hold_timeout_ms}, link_, queues_,
          counters->late_acks,
          [this](std::vector<Completion> &&overdue) { complete(std::move(overdue)); }, queue_log()),
      completions_(
          loop,
          {opts_.owner, opts_.lease_ms, opts_.max_attempts, opts_.retry_base_ms, opts_.retry_max_ms,
           opts_.done_window_ms, opts_.reconnect, opts_.on_redirect},
          link_, queues_, leases_, *counters, [this] { return claiming_; },
          [this] { return acks_wait_for_claims(); }, queue_log()),
      arrivals_(loop,
                {opts_.ns, opts_.cluster, opts_.scan_interval_ms, opts_.migration_wait_ms,
                 opts_.on_moved},
                link_, queues_,
                {[this](Queue &q) { sweep(q); },
                 [this](Queue &q, const redisReply *r) { claims_failing(q, r); },
                 [this](Queue &q) { claims_work(q); }, queue_log()}),
      v1_engines_(loop, opts_.scan_interval_ms, link_,
                  [this](kw_log_level level, const std::string &message) { log(level, message); }),
      adoption_({opts_.adopt, opts_.cluster, opts_.on_unrouted_adopt,
                 [this] { catchup_.request("adoptions dropped"); }},
                link_, queues_, *counters, queue_log()),
      catchup_(
          loop,
          {&opts_.adopt, opts_.catchup_enable, opts_.catchup_first_reason, url.db,
           opts_.catchup_count, opts_.catchup_rate, opts_.node_name, opts_.reconnect,
           opts_.subscribed, opts_.catchup_counters, opts_.node_stats},
          link_,
          [this](std::vector<AdoptKey> &&keys, AdoptScan::Answered answered) {
              adoption_.add(std::move(keys), std::move(answered));
          },
          [this](kw_log_level level, const std::string &message) { log(level, message); }) {
    if (!opts_.claims_in_flight) opts_.claims_in_flight = &own_claims_in_flight_;
}

Sweeper::~Sweeper() = default;

QueueLog Sweeper::queue_log() {
    return [this](kw_log_level level, const std::string &message, const Queue *q) {
        log(level, message, q);
    };
}

void Sweeper::start() {
    started_ = true;
    claiming_ = true;
    arrivals_.start();
    leases_.start();
    link_.start();
}

void Sweeper::stop_claiming() {
    claiming_ = false;
    set_sweeping(false);
    arrivals_.stop();
    v1_engines_.stop();
    catchup_.stop();
    queues_.for_each([](Queue &q) { q.timer->cancel(); });
    completions_.send();  // acks held back for claims go out now
}

void Sweeper::shutdown() {
    link_.stop();
    stop_claiming();
    completions_.shutdown();
    leases_.stop();
    link_.close();
    *opts_.claims_in_flight -= claims_out_;
    claims_out_ = 0;
}

void Sweeper::complete(std::vector<Completion> &&done) {
    completions_.complete(std::move(done));
}

bool Sweeper::holds(const Completion &c) {
    SlotQueue *q = queues_.existing_of(c.queue, c.id, c.slot);
    if (!q) return false;
    const Queue::Mark *h = q->held_mark(c.id);
    return h && (c.claimed_ms == 0 || h->claimed_ms == c.claimed_ms);
}

void Sweeper::retry_now() {
    link_.retry_now();
}

void Sweeper::resume() {
    completions_.resume();
    set_sweeping(claiming_ && !claims_failing_since_ms_);
    if (claiming_) {
        queues_.for_each([this](Queue &q) { take_back_unanswered(q); });
        auto sweep_all = [this] {
            if (claiming_) queues_.for_each([this](Queue &q) { sweep(q); });
        };
        // Claims that may be alone first learn whether an engine of the earlier version
        // listens (one round trip; until then every claim would be shared).
        if (opts_.engines_channel.empty() || !opts_.track_keys)
            sweep_all();
        else
            v1_engines_.connected(sweep_all);
        // Cluster: what arrived while we were away is found by a full scan.
        arrivals_.scan_all();
        std::vector<Event> backlog;
        backlog.swap(live_backlog_);
        if (!backlog.empty()) claim_live(std::move(backlog));
        adoption_.resume();  // after the claims, as in a read
        catchup_.request("sweeper reconnected");
    }
    completions_.send();
}

void Sweeper::on_lost() {
    set_sweeping(false);
    catchup_.connection_lost();
    completions_.connection_lost();
    v1_engines_.lost();
    *opts_.claims_in_flight -= claims_out_;  // their answers will not come
    claims_out_ = 0;
    arrivals_.connection_lost();
    queues_.for_each([this](Queue &q) {
        for (auto &s : q.sweeps) q.unanswered[s.first] = wall_ms();
        q.sweeps.clear();
        q.bursting = false;
        q.peeking = false;
        q.timer->cancel();
        for (auto &ev : q.deferred) keep_for_later(std::move(ev));
        q.deferred.clear();
    });
}

}  // namespace keywatch
