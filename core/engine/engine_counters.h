// EngineCounters: the engine's counts of events and handler outcomes. The node intakes
// (node_intake.h) count what they read and drop, the workers what the handlers did; stats read
// them. Thread-safe: atomics; per_event's keys are fixed before the engine starts.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

namespace keywatch {

struct EngineCounters {
    std::atomic<int64_t> received{0}, delivered{0}, dropped{0}, abandoned{0}, handler_errors{0},
        handler_retries{0}, unhandled{0}, lateness_max{0}, topology_refreshes{0},
        slots_uncovered{0};  // cluster: slots of the last topology without a master
    std::map<std::string, std::atomic<int64_t>> per_event;  // fixed keys after start
};

}  // namespace keywatch
