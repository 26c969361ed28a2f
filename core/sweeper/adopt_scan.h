// AdoptScan: the catch-up scan of one master for adopt rules (adopt.rules). Keys whose TTL
// was set while no engine listened (before the first start, while the subscriber was
// reconnecting, on a new master after a failover, or when adoptions were dropped) are found
// by SCAN cursor MATCH <rule glob> COUNT catchup.count and handed to the adoption batches,
// which adopt those with a TTL that are not tracked yet. A scan starts once the node's
// subscriber is subscribed and its sweeper's connection serves, so that a TTL set after the
// scan started is heard and one set before is found (SCAN returns every key present for the
// whole scan); a new reason restarts it from cursor 0. It is paced: one SCAN in flight, sent
// on a schedule of one every catchup.count / catchup.rate seconds (keys per second), right
// behind the previous SCAN's adoptions on the same connection (at most kMaxAdoptsInFlight
// SCANs' adoptions unanswered; the pass ends when they all are). DBSIZE at the start
// gives the progress (catchup.progress.<node>), a log line every kProgressLogMs and at the
// end.
// Loop thread only (owned by a Sweeper).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/base/backoff.h"
#include "core/base/stats.h"
#include "core/queue/adopt_rules.h"
#include "core/redis/event_loop.h"
#include "core/sweeper/adoption.h"
#include "core/sweeper/node_link.h"
#include "keywatch_types.h"

namespace keywatch {

// catchup.scans and catchup.keys of one engine, shared by its sweepers. Thread-safe.
struct CatchupCounters {
    std::atomic<int64_t> scans{0}, keys{0};
};

// The warning for a rule that matches every key (no literal part): logged when a master's
// scan starts and printed by `keywatch check`. `rule` is its index from 0.
std::string every_key_warning(const AdoptRule &rule, size_t rule_index, int db,
                              const std::string &node, int64_t dbsize, int64_t rate);

class AdoptScan {
  public:
    using Answered = std::function<void(const AdoptTally &)>;
    // Scanned keys (from_event false) to the adoption batches; `answered` runs once when
    // every one of them is answered, kept, parked or dropped.
    using Adopt = std::function<void(std::vector<AdoptKey> &&keys, Answered answered)>;
    struct Options {
        const AdoptRules *rules = nullptr;  // none (empty): it never scans
        bool enable = true;                 // catchup.enable
        // The reason its first scan gives ("engine start", "new master"): the first request
        // of any kind starts that one.
        std::string first_reason = "engine start";
        int db = 0;
        int64_t count = 1000, rate = 250000;  // catchup.count, catchup.rate
        const std::string *node_name = nullptr;
        Backoff retry;                        // after a failed SCAN
        std::function<bool()> subscribed;     // the node's subscriber is subscribed now
        CatchupCounters *counters = nullptr;  // null: not counted
        NodeStats *node_stats = nullptr;      // catchup.scanning/progress; null: none
    };
    using Log = std::function<void(kw_log_level, const std::string &)>;

    AdoptScan(EventLoop &loop, Options opts, NodeLink &link, Adopt adopt, Log log);
    AdoptScan(const AdoptScan &) = delete;
    AdoptScan &operator=(const AdoptScan &) = delete;

    // A reason to read the node again from the start ("subscriber reconnected", "sweeper
    // reconnected", ...): the scan (re)starts at cursor 0 once it can (see poke()); one
    // waiting to start keeps the reason it has.
    void request(const std::string &reason);
    // The subscriber was subscribed or the connection serves again: a requested scan
    // starts now if both hold.
    void poke();
    // The connection went: what was on its way will not be answered; the scan starts again
    // from the beginning when it serves.
    void connection_lost();
    void stop();  // nothing more is sent
    bool scanning() const { return running_; }

  private:
    static constexpr int64_t kProgressLogMs = 10000;
    // Adopt calls of earlier SCANs not answered yet before the next SCAN waits for them.
    static constexpr int kMaxAdoptsInFlight = 2;

    void begin();
    void on_dbsize(redisReply *r);
    void next();  // the next SCAN when paced, or the end of the pass
    void send();
    void on_scan(uint64_t gen, redisReply *r);
    void advance();  // after a SCAN's reply: the next SCAN, pass, or the end
    void on_answered(uint64_t gen, const AdoptTally &t);
    void failed(const std::string &what, redisReply *r);
    void finish();
    void set_progress(int64_t permille);
    void log_progress();
    std::string node() const;
    std::string match_text() const;

    Options opts_;
    NodeLink &link_;
    Adopt adopt_;
    Log log_;
    Timer timer_;
    std::vector<std::string> matches_;  // one MATCH pattern per pass ("": none)
    bool stopped_ = false, running_ = false, pending_ = false, started_once_ = false;
    std::string reason_;
    uint64_t gen_ = 0;  // replies of an older scan are ignored
    size_t pass_ = 0;
    std::string cursor_ = "0";
    int64_t calls_ = 0;         // SCAN calls of this pass
    int64_t dbsize_ = 0;        // at the scan's start
    int64_t next_send_us_ = 0;  // pacing (steady clock)
    int64_t started_us_ = 0, logged_us_ = 0;
    int64_t matched_ = 0, adopted_ = 0, tracked_ = 0;
    int failures_ = 0;
    int adopts_in_flight_ = 0;  // adopt calls of this scan not answered yet
    bool held_ = false;         // advance() waits for an adoption's answer
    bool ending_ = false;       // every key is read: finish once adopts_in_flight_ is 0
};

}  // namespace keywatch
