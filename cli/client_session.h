// What the client verbs (track, untrack, adopt, schedule, cancel, reschedule, inspect,
// dead ...) share: the --redis/--namespace/--conf/--quiet options, a kw_client_t built
// from them through the C API, messages in the command line's words, and the mapping of
// library statuses to exit statuses.
// Not thread-safe: the main thread owns a session.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "keywatch.h"

namespace CLI {
class App;
}

namespace keywatch::cli {

// The verbs' default Redis: unlike watch and demo, they never start a private server
// (what they write would vanish with it).
inline constexpr const char *kDefaultRedisUrl = "redis://127.0.0.1:6379";

struct ClientArgs {
    std::string redis;              // --redis or KEYWATCH_REDIS_URL; empty: kDefaultRedisUrl
    std::string ns;                 // namespace; empty: the library's default ("kw")
    std::vector<std::string> conf;  // NAME=VALUE library options, applied last
    bool quiet = false;             // no notes on stderr
};

// Registers --redis (env KEYWATCH_REDIS_URL), --namespace, -c/--conf and -q/--quiet.
void add_client_options(CLI::App *cmd, ClientArgs *args);

// Splits "NAME=VALUE" items of --conf. False with *err naming the bad item.
bool split_conf(const std::vector<std::string> &items,
                std::vector<std::pair<std::string, std::string>> *out, std::string *err);

// Checks made before anything connects (so bad input writes nothing and does not depend
// on Redis being up). False with *err naming the argument.
bool check_key_arg(const std::string &what, const std::string &key, std::string *err);
// A queue name by the library's rule; task_queue also refuses "keys" (the key-tracking
// queue, which is written with keywatch track).
bool check_queue_arg(const std::string &queue, bool task_queue, std::string *err);

// Exit status for a failed library call: 2 (bad input, nothing was done) for
// KW_ERR_INVALID_ARG, KW_ERR_TOO_LARGE, KW_ERR_URL, KW_ERR_BAD_VALUE and
// KW_ERR_UNKNOWN_CONF; 1 for everything else.
int exit_status_for(int status);

// A library message in the command line's words: names of C functions, flags and options
// become the verbs and options that do the same.
std::string cli_words(std::string message);

class ClientSession {
  public:
    explicit ClientSession(std::string verb);
    ~ClientSession();
    ClientSession(const ClientSession &) = delete;
    ClientSession &operator=(const ClientSession &) = delete;

    // Builds the configuration from args (plus extra NAME/VALUE pairs set before --conf)
    // and connects. Returns an exit status: 0 ready, 2 for a refused option, 1 when Redis
    // cannot be reached; the message is already on stderr.
    int open(const ClientArgs &args,
             const std::vector<std::pair<std::string, std::string>> &extra = {});
    kw_client_t *get() const { return client_; }

    // "keywatch <verb>: <text>" on stderr; notes are left out with --quiet, errors never.
    void note(const std::string &text) const;
    void error(const std::string &text) const;
    // Reports a failed call (what, then the client's last error in the command line's
    // words, then hint if any) and returns its exit status.
    int fail(int status, const std::string &what, const std::string &hint = "") const;
    // Writes text to stdout and flushes. False (with a message) when stdout fails.
    bool print(const std::string &text) const;

  private:
    std::string verb_;
    bool quiet_ = false;
    kw_conf_t *conf_ = nullptr;
    kw_client_t *client_ = nullptr;
};

}  // namespace keywatch::cli
