// Each component's slice of the one validated Config: the only place where Config's fields
// are copied into Subscriber::Options, Sweeper::Options and Fanout::Options. Those structs
// carry no defaults of their own (a default lives once, in Config); the engine adds only
// the wiring known at start (events, queues, callbacks, node names). (The blocking client's
// router gets its slice from router_options, core/client/client.h: the client layer comes
// before the engine's.)
// Pure functions: thread-safe.
#pragma once

#include "core/config/config.h"
#include "core/engine/fanout.h"
#include "core/engine/plan.h"
#include "core/engine/subscriber.h"
#include "core/sweeper/sweeper.h"

namespace keywatch {

// Connection, reconnect and health settings of one node's subscriber.
Subscriber::Options subscriber_options(const Config &c);
// Queue, lease, retry, sweep, dedupe and connection settings of one node's sweeper;
// `owner` names this engine in its claims.
Sweeper::Options sweeper_options(const Config &c, const std::string &owner);
// What the engine's plan reads (plan.h).
PlanConfig plan_config(const Config &c);
// The fan-out's settings, with sub and sweep filled from the two functions above.
Fanout::Options fanout_options(const Config &c, const std::string &owner);

}  // namespace keywatch
