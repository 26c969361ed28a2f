#include "cli/daemon/daemon_log.h"

#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

namespace keywatch::cli {
namespace {

// "2026-11-23T17:05:00.123Z": UTC, milliseconds.
std::string timestamp() {
    using namespace std::chrono;
    const int64_t ms = duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
    const time_t secs = static_cast<time_t>(ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char buf[96];  // room for any int the compiler imagines
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<int>(ms % 1000));
    return buf;
}

// A JSON string (invalid UTF-8 replaced), for text values that need quoting.
std::string quoted(const std::string &text) {
    return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A text-format value: bare when it has no space, quote, '=' or control byte.
std::string text_value(const std::string &value) {
    if (value.empty()) return "\"\"";
    for (unsigned char c : value)
        if (c <= ' ' || c == '"' || c == '=' || c == 0x7f) return quoted(value);
    return value;
}

int open_append(const std::string &path) {
    return ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

}  // namespace

DaemonLog::~DaemonLog() {
    if (fd_ > 2) ::close(fd_);
}

bool DaemonLog::open(const LogConfig &config, std::string *err) {
    config_ = config;
    if (config.file.empty()) return true;
    const int fd = open_append(config.file);
    if (fd < 0) {
        *err = "[log] file: cannot open " + config.file + ": " + std::strerror(errno) +
               "; check the path and the permissions of its directory";
        return false;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (fd_ > 2) ::close(fd_);
    fd_ = fd;
    return true;
}

void DaemonLog::reopen() {
    if (config_.file.empty()) return;
    const int fd = open_append(config_.file);
    if (fd < 0) {
        write(KW_LOG_ERROR,
              "cannot reopen the log file: " + std::string(std::strerror(errno)) +
                  "; still writing to the file opened before",
              {{"file", config_.file}});
        return;
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (fd_ > 2) ::close(fd_);
        fd_ = fd;
    }
    write(KW_LOG_INFO, "log file reopened", {{"file", config_.file}});
}

const char *DaemonLog::level_name(int level) {
    static const char *const kNames[] = {"debug", "info", "warn", "error"};
    return level >= KW_LOG_DEBUG && level <= KW_LOG_ERROR ? kNames[level] : "error";
}

std::string DaemonLog::format_line(int level, const std::string &message,
                                   const Fields &fields) const {
    if (config_.format == LogFormat::Json) {
        nlohmann::ordered_json line;
        line["ts"] = timestamp();
        line["level"] = level_name(level);
        line["msg"] = message;
        for (const auto &[name, value] : fields) line[name] = value;
        return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    }
    std::string line = timestamp() + " " + level_name(level) + " " + message;
    for (const auto &[name, value] : fields) line += " " + name + "=" + text_value(value);
    // A message is one line: a newline inside it would split the record.
    for (char &c : line)
        if (c == '\n' || c == '\r') c = ' ';
    return line + "\n";
}

void DaemonLog::write_line(const std::string &line) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t done = 0;
    while (done < line.size()) {
        const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // nowhere left to report it
        done += static_cast<size_t>(n);
    }
}

void DaemonLog::write(int level, const std::string &message, const Fields &fields) {
    if (!enabled(level)) return;
    write_line(format_line(level, message, fields));
}

void DaemonLog::on_engine_log(kw_log_level level, const char *message, void *opaque) {
    on_engine_log_fields(level, message, nullptr, opaque);
}

void DaemonLog::on_engine_log_fields(kw_log_level level, const char *message,
                                     const char *const *fields, void *opaque) {
    auto *self = static_cast<DaemonLog *>(opaque);
    if (!self->enabled(level)) return;
    try {  // nothing may reach the engine's threads
        Fields list;
        for (size_t i = 0; fields && fields[i] && fields[i + 1]; i += 2)
            list.emplace_back(fields[i], fields[i + 1]);
        self->write(level, message ? message : "", list);
    } catch (...) {
    }
}

}  // namespace keywatch::cli
