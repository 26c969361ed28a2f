// The daemon's /readyz verdict: ready only when the engine is connected and subscribed to
// every node it serves (the server, or every master of a cluster: node.state READY for
// each node listed, as many as conn.nodes) and, when it serves queues, the sweeper of each
// is claiming (node.sweeping), and in a cluster every slot has a working master
// (conn.slots_uncovered 0); otherwise a JSON body naming what is not ready
// ({"ready":false,"not_ready":["node H:P: subscriber broken",...],"nodes":[...]}). Nodes
// follow the topology: after a failover the promoted replica replaces the failed master;
// between the failure and the promotion the failed master's slots are uncovered.
// Read from a kw_engine_stats snapshot. Thread-safety: any thread.
#pragma once

#include <string>

#include "keywatch.h"

namespace keywatch::cli {

struct Readiness {
    bool ready = false;
    std::string json;  // {"ready":true,...} or {"ready":false,"not_ready":[...]}
};

Readiness check_readiness(kw_engine_t *engine);

}  // namespace keywatch::cli
