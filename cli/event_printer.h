// Output of the CLI: events as JSON lines on stdout, notes on stderr. Handlers run on
// several worker threads, so every line is written whole under one mutex and flushed at
// once (lines must show up immediately when stdout is a pipe). When stdout goes away
// (EPIPE: `keywatch watch | head`), the printer asks the main thread to stop.
// A tracked key or task is acknowledged only once its line is written and flushed: an
// item whose line could not be written is handed back for a retry, never lost.
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "cli/stop_signal.h"
#include "keywatch.h"

namespace keywatch::cli {

class EventPrinter {
  public:
    explicit EventPrinter(StopSignal *stop) : stop_(stop) {}

    // The event's JSON line (kw_event_json) on stdout, flushed. False when it could not be
    // made or written (stdout closed or failing; the printer then asks for a stop).
    // Handler threads.
    bool print(const kw_event_t *ev);
    // "keywatch: <text>" on stderr.
    void note(const std::string &text);

    // A kw_handler_fn printing every event; opaque is the EventPrinter. Returns ACK once
    // the line is flushed; RETRY (with the reason recorded) when a tracked key's or task's
    // line could not be written, so that the item is delivered again.
    static int handle(kw_event_t *ev, void *opaque);
    // What a handler returns after print() gave `printed` for ev.
    static int result_for(kw_event_t *ev, bool printed);

    // Lines written to stdout so far.
    uint64_t lines() const { return lines_.load(); }
    // True when writing to stdout failed for a reason other than a closed pipe (disk
    // full, ...); the text is in error().
    bool failed() const;
    std::string error() const;

  private:
    StopSignal *stop_;
    mutable std::mutex mu_;
    std::atomic<uint64_t> lines_{0};
    bool broken_ = false;  // stdout unusable: stop printing
    std::string error_;
};

}  // namespace keywatch::cli
