// MasterFinder: the loop's way to find the master of a redis+sentinel:// URL, and to hear of
// failovers. find() asks the sentinels in the URL's order (SENTINEL get-master-addr-by-name,
// then ROLE on the address named: core/redis/sentinel.h reads both replies); a sentinel that
// is down or names a node that is not a master is passed over for the next; when none gave a
// master the round starts again after a backoff, until one does. watch_switches() keeps one
// sentinel connection subscribed to +switch-master (moving to the next sentinel when it is
// lost). Every step runs from a timer, never inside a connection's own callback, so the
// connections can be replaced freely.
// Loop thread only. Not thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/base/backoff.h"
#include "core/base/log_fields.h"
#include "core/redis/event_loop.h"
#include "core/redis/redis_conn.h"
#include "core/redis/sentinel.h"

namespace keywatch {

class MasterFinder {
  public:
    using Found = std::function<void(const FoundMaster &)>;

    // url: the sentinel URL (with the sentinel.* options); timeout_ms: each connection's
    // handshake and each answer; backoff: between rounds in which no sentinel gave a master.
    MasterFinder(event_base *base, RedisUrl url, int64_t timeout_ms, Backoff backoff, LogFn log);
    ~MasterFinder();
    MasterFinder(const MasterFinder &) = delete;
    MasterFinder &operator=(const MasterFinder &) = delete;

    // Starts a search unless one runs; `found` is called once, with the master confirmed.
    void find(Found found);
    bool searching() const { return searching_; }
    // Subscribes to +switch-master on a sentinel; on_switch is called for this master's.
    void watch_switches(std::function<void()> on_switch);
    void close();  // every connection and timer: nothing follows

  private:
    void ask(size_t i);      // sentinel i: where is the master?
    void confirm(size_t i);  // the address it named: ROLE
    void passed(size_t i, const std::string &why);
    void subscribe();  // watch_ to sentinel watch_at_

    event_base *base_;
    RedisUrl url_;
    int64_t timeout_ms_;
    Backoff backoff_;
    LogFn log_;
    Found found_;
    bool searching_ = false;
    size_t next_ = 0;          // the sentinel asked next
    int round_ = 0;            // rounds in a row without a master
    std::string passed_over_;  // what the sentinels of this round said
    Endpoint named_;           // the address the sentinel asked last named
    std::unique_ptr<RedisConn> sentinel_, master_, watch_;
    Timer ask_timer_, confirm_timer_, watch_timer_;
    std::function<void()> on_switch_;
    size_t watch_at_ = 0;
    int watch_round_ = 0;
};

}  // namespace keywatch
