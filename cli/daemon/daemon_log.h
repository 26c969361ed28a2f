// The daemon's log: one line per message, as a JSON object ({"ts":..,"level":..,"msg":..,
// then fields such as node, queue, handler, event_id}) or as plain text ("TS LEVEL msg
// name=value ..."), to stderr or to [log] file (opened for appending; reopen() after
// SIGHUP, for logrotate). Messages below [log] level are dropped. The engine's log
// callbacks (kw_log_fn, and the structured kw_log_fields_fn when the engine has it) feed it
// through on_engine_log*, so plugin logs take the same path.
// Thread-safe: write() may be called from any thread; each line is one write(2).
#pragma once

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cli/daemon/daemon_config.h"
#include "keywatch.h"

namespace keywatch::cli {

class DaemonLog {
  public:
    using Fields = std::vector<std::pair<std::string, std::string>>;

    DaemonLog() = default;
    ~DaemonLog();
    DaemonLog(const DaemonLog &) = delete;
    DaemonLog &operator=(const DaemonLog &) = delete;

    // Takes the format and level, and opens the file (stderr when none). False with *err
    // ("[log] file: cannot open /x/y.log: Permission denied") when it cannot be opened.
    bool open(const LogConfig &config, std::string *err);
    // Opens the file again under its name and switches to it (logrotate moved the old
    // one). On failure keeps writing to the old one and says so in the log. No-op without
    // a file. Any thread.
    void reopen();

    // True when messages of this level are written.
    bool enabled(int level) const { return level >= config_.level; }
    // One line. level is a kw_log_level. Any thread.
    void write(int level, const std::string &message, const Fields &fields = {});

    // kw_log_fn: opaque is the DaemonLog.
    static void on_engine_log(kw_log_level level, const char *message, void *opaque);
    // The structured form: fields are name, value, ..., NULL.
    static void on_engine_log_fields(kw_log_level level, const char *message,
                                     const char *const *fields, void *opaque);

    // "debug", "info", "warn", "error".
    static const char *level_name(int level);

  private:
    std::string format_line(int level, const std::string &message, const Fields &fields) const;
    void write_line(const std::string &line);

    LogConfig config_;
    std::mutex mu_;
    int fd_ = 2;  // stderr unless a file is open
};

}  // namespace keywatch::cli
