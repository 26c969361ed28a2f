// V1Engines: whether an engine of the version before the batch layout is subscribed on one
// node. Such an engine does not subscribe the engines channel (channel.h), so the listeners
// a claim counts there (PUBSUB NUMSUB) leave it out, yet it hears the notifications of the
// keys this engine claims and must find their in-flight entries and done records: while one
// is there, this engine's claims are shared. Its heartbeat channel has the old shape
// (kV1HeartbeatGlob); `PUBSUB CHANNELS` of that shape is asked at every (re)connect and every
// sweep.scan_interval. Until the first answer one is assumed present; a refused question
// (an ACL without PUBSUB CHANNELS) is said once and taken as none (docs/reliable-delivery.md,
// "In-flight entries and done records").
// Loop thread only (owned by a Sweeper).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/redis/event_loop.h"
#include "core/sweeper/node_link.h"
#include "keywatch_types.h"

namespace keywatch {

class V1Engines {
  public:
    // interval_ms: how often it asks while connected (sweep.scan_interval).
    V1Engines(EventLoop &loop, int64_t interval_ms, NodeLink &link,
              std::function<void(kw_log_level, const std::string &)> log);
    V1Engines(const V1Engines &) = delete;
    V1Engines &operator=(const V1Engines &) = delete;

    // Asks now, and every interval from now; `answered` runs at the answer (the claims
    // that wait for it: none is sent before it but shared).
    void connected(std::function<void()> answered);
    void lost();  // unknown again until the next answer
    void stop();
    // Whether claims on this node must be shared for an engine of the earlier version
    // (or because none has been ruled out yet).
    bool present() const { return present_; }

  private:
    void ask(std::function<void()> answered = nullptr);

    int64_t interval_ms_;
    NodeLink &link_;
    std::function<void(kw_log_level, const std::string &)> log_;
    Timer timer_;
    bool present_ = true;
    bool refusal_said_ = false;
};

}  // namespace keywatch
