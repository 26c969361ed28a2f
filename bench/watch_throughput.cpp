// kw_bench_watch: keyspace events per second that keywatch delivers to a no-op C handler,
// against a raw hiredis + libevent subscriber counting the same flood in the same run.
// The target: keywatch reaches at least 90% of the raw subscriber's rate (median of
// several rounds) with no disconnect for output-buffer overflow.
//
// Method
//  - One private redis-server (RedisProcess) with notify-keyspace-events "Eg$xe": keyevent
//    channels only, since keyspace channels would double Redis' publishing work and reach no
//    subscriber. Redis' default client-output-buffer-limit for pubsub (32mb hard, 8mb for
//    60s) is kept, so a subscriber that falls behind really is disconnected.
//  - The flood: P publisher threads, each with its own connection, write pre-encoded
//    pipelines (one batch in flight ahead of the replies they wait for) and count reply
//    lines instead of parsing replies, so that they leave the CPU to Redis and the
//    subscribers. Default `--flood set`: `SET kwbench:<n> v` over a key set written once
//    before the first round, so each command makes Redis publish exactly one real
//    `__keyevent@0__:set` notification. `--flood publish` sends `PUBLISH __keyevent@0__:set
//    kwbench:<n>` instead: the same bytes on the subscriber's socket for less work in Redis.
//    Every run gets the identical flood of exactly N events.
//  - Raw subscriber: its own thread, event_base and redisAsyncContext (hiredis' libevent
//    adapter), PSUBSCRIBE __keyevent@*__:set (the pattern keywatch subscribes to for the
//    event "set"), counting pmessages in the reply callback.
//  - keywatch: one engine with one handler (filter events=set), a C function that counts in
//    an atomic and returns KW_RESULT_ACK.
//  - Rate = (received - 1) / (time of the last - time of the first event), both stamped
//    where the event is counted. A run ends when all N events arrived, when nothing arrived
//    for --idle-ms after the flood finished, or at --timeout.
//  - `--mode alternate` (default): each round runs the raw subscriber and keywatch one after
//    the other, each alone with the flood, alternating which goes first. `--mode same-run`:
//    both are subscribed to one flood. A warm-up round is not counted; the summary compares
//    the medians.
//  - CPU per event: this process's CPU time during the flood, minus the publishers' and
//    the monitoring thread's, is the subscribers'; the raw subscriber's thread also has its
//    own clock (so same-run mode can split the two). Redis' from INFO cpu. On a small
//    machine every subscriber that keeps up is paced by Redis, and a subscriber's CPU is
//    CPU that Redis and the publishers do not get: this figure explains the rates.
//  - Disconnects: the raw subscriber's disconnect callback; keywatch's state callback
//    (KW_CONN_BROKEN) and its "conn.reconnects" stat; and Redis' own log lines about
//    "output buffer limits" (told apart by the raw subscriber's client name). Drops:
//    keywatch's "events.dropped". Peak output buffer: CLIENT LIST omem, sampled every 100ms.
//  - keywatch calls evthread_use_pthreads() when its first loop starts, which changes every
//    event_base created afterwards. The benchmark calls it up front so that every raw run
//    uses the same (locking) libevent as every keywatch run.
//
// Exit status: 0 whatever the verdict; 1 when the benchmark itself could not run (Redis did
// not start, a connection failed, a bad flag).
#include "embedded/redis_process.h"
#include "keywatch.h"

#include <event2/event.h>
#include <event2/thread.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace {

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void sleep_ms(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

int64_t cpu_clock_ns(clockid_t clock) {
    timespec ts{};
    if (clock_gettime(clock, &ts) != 0) return -1;
    return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
int64_t thread_cpu_ns() {
    return cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}
int64_t process_cpu_ns() {
    return cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

const char *const kEvent = "set";
const char *const kChannel = "__keyevent@0__:set";
const char *const kPattern = "__keyevent@*__:set";

struct Options {
    int rounds = 5;
    int warmup = 1;
    uint64_t events = 1000000;
    int publishers = 2;
    uint64_t keys = 100000;
    int batch = 1000;
    std::string flood = "set";
    std::string mode = "alternate";
    bool pin = false;  // redis-server on CPU 0, the benchmark's threads on the others
    std::string only;  // "raw" or "keywatch": run just that one (profiling), no verdict
    std::string notify = "Eg$xe";
    int idle_ms = 3000;
    int timeout_s = 60;
    std::vector<std::pair<std::string, std::string>> conf;  // passed to kw_conf_set
    bool verbose = false;
};

void usage(FILE *out) {
    fprintf(out,
            "usage: kw_bench_watch [options]\n"
            "  --rounds R        measured rounds, each runs raw and keywatch (default 5)\n"
            "  --warmup W        uncounted rounds first (default 1)\n"
            "  --events N        events per run (default 1000000)\n"
            "  --publishers P    publisher threads (default 2)\n"
            "  --keys K          distinct keys the SET flood cycles over (default 100000)\n"
            "  --batch B         commands per pipelined batch (default 1000)\n"
            "  --flood set|publish  SET keys (real notifications, default) or PUBLISH to\n"
            "                    __keyevent@0__:set directly\n"
            "  --mode alternate|same-run  each round: raw and keywatch in turn, each alone with\n"
            "                    the flood (default), or both subscribed to one flood\n"
            "  --only raw|keywatch  run just one subscriber (for profiling): no comparison\n"
            "  --notify FLAGS    notify-keyspace-events of the server (default Eg$xe)\n"
            "  --idle-ms MS      end a run after this long without events once the flood is\n"
            "                    done (default 3000)\n"
            "  --timeout S       longest run (default 60)\n"
            "  --conf NAME=VALUE keywatch configuration option (repeatable), e.g.\n"
            "                    --conf workers=2 --conf dispatch.queue_size=1048576\n"
            "  --pin             redis-server alone on CPU 0, this program's threads on the\n"
            "                    other CPUs (steadier figures on a small machine)\n"
            "  --verbose         print keywatch's info/debug log lines too\n");
}

bool parse_uint(const std::string &text, uint64_t min, uint64_t max, uint64_t *out) {
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return false;
    errno = 0;
    unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
    if (errno != 0 || v < min || v > max) return false;
    *out = v;
    return true;
}

// Returns false (after printing why) for a bad command line.
bool parse_args(int argc, char **argv, Options *o) {
    for (int i = 1; i < argc; i++) {
        std::string arg = argv[i];
        std::string value;
        bool has_value = false;
        size_t eq = arg.find('=');
        if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
            has_value = true;
        }
        if (arg == "--help" || arg == "-h") {
            usage(stdout);
            exit(0);
        }
        if (arg == "--verbose") {
            o->verbose = true;
            continue;
        }
        if (arg == "--pin") {
            o->pin = true;
            continue;
        }
        static const char *const valued[] = {
            "--rounds", "--warmup", "--events", "--publishers", "--keys",    "--batch", "--flood",
            "--mode",   "--only",   "--notify", "--idle-ms",    "--timeout", "--conf"};
        if (std::none_of(std::begin(valued), std::end(valued),
                         [&](const char *v) { return arg == v; })) {
            fprintf(stderr, "kw_bench_watch: unknown option %s (try --help)\n", arg.c_str());
            return false;
        }
        if (!has_value) {
            if (i + 1 >= argc) {
                fprintf(stderr, "kw_bench_watch: %s needs a value\n", arg.c_str());
                return false;
            }
            value = argv[++i];
        }
        uint64_t n = 0;
        bool ok = true;
        if (arg == "--rounds") {
            ok = parse_uint(value, 1, 1000, &n) && (o->rounds = int(n), true);
        } else if (arg == "--warmup") {
            ok = parse_uint(value, 0, 100, &n) && (o->warmup = int(n), true);
        } else if (arg == "--events") {
            ok = parse_uint(value, 2, 1000000000ull, &o->events);
        } else if (arg == "--publishers") {
            ok = parse_uint(value, 1, 64, &n) && (o->publishers = int(n), true);
        } else if (arg == "--keys") {
            ok = parse_uint(value, 1, 100000000ull, &o->keys);
        } else if (arg == "--batch") {
            ok = parse_uint(value, 1, 1000000, &n) && (o->batch = int(n), true);
        } else if (arg == "--flood") {
            ok = value == "set" || value == "publish";
            o->flood = value;
        } else if (arg == "--mode") {
            ok = value == "alternate" || value == "same-run";
            o->mode = value;
        } else if (arg == "--only") {
            ok = value == "raw" || value == "keywatch";
            o->only = value;
        } else if (arg == "--notify") {
            o->notify = value;
        } else if (arg == "--idle-ms") {
            ok = parse_uint(value, 10, 600000, &n) && (o->idle_ms = int(n), true);
        } else if (arg == "--timeout") {
            ok = parse_uint(value, 1, 3600, &n) && (o->timeout_s = int(n), true);
        } else if (arg == "--conf") {
            size_t e = value.find('=');
            ok = e != std::string::npos && e > 0;
            if (ok) o->conf.emplace_back(value.substr(0, e), value.substr(e + 1));
        } else {
            fprintf(stderr, "kw_bench_watch: unknown option %s (try --help)\n", arg.c_str());
            return false;
        }
        if (!ok) {
            fprintf(stderr, "kw_bench_watch: bad value '%s' for %s (try --help)\n", value.c_str(),
                    arg.c_str());
            return false;
        }
    }
    return true;
}

std::string with_commas(double v) {
    std::string digits = std::to_string(static_cast<long long>(v + 0.5));
    std::string out;
    int n = 0;
    for (size_t i = digits.size(); i-- > 0;) {
        if (n && n % 3 == 0 && digits[i] != '-') out.insert(out.begin(), ',');
        out.insert(out.begin(), digits[i]);
        n++;
    }
    return out;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Where both subscribers count. The first and the N-th event are stamped where they are
// counted, so the rate covers exactly the delivery of the flood.
struct alignas(64) Counter {
    std::atomic<uint64_t> count{0};
    std::atomic<int64_t> first_ns{0};
    std::atomic<int64_t> last_ns{0};
    uint64_t expected = 0;  // set before any subscriber thread exists

    void reset(uint64_t n) {
        count = 0;
        first_ns = 0;
        last_ns = 0;
        expected = n;
    }
    void hit() {
        uint64_t n = count.fetch_add(1, std::memory_order_relaxed) + 1;
        if (n == 1) first_ns.store(now_ns(), std::memory_order_relaxed);
        if (n == expected) last_ns.store(now_ns(), std::memory_order_relaxed);
    }
};

// ---- The flood ------------------------------------------------------------------------

void append_command(std::string &out, std::initializer_list<std::string_view> args) {
    out += '*';
    out += std::to_string(args.size());
    out += "\r\n";
    for (std::string_view a : args) {
        out += '$';
        out += std::to_string(a.size());
        out += "\r\n";
        out.append(a.data(), a.size());
        out += "\r\n";
    }
}

std::string key_name(uint64_t i) {
    char buf[32];
    snprintf(buf, sizeof buf, "kwbench:%08llu", static_cast<unsigned long long>(i));
    return buf;
}

// Commands encoded ahead of time: `count` commands in one buffer, sent as one pipeline.
struct Batch {
    std::string wire;
    int count = 0;
};

struct ContextDeleter {
    void operator()(redisContext *c) const { redisFree(c); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

ContextPtr connect_sync(const std::string &host, int port, std::string *err) {
    timeval tv{5, 0};
    ContextPtr c(redisConnectWithTimeout(host.c_str(), port, tv));
    if (!c || c->err) {
        *err = "cannot connect to " + host + ":" + std::to_string(port) + ": " +
               (c ? c->errstr : "out of memory");
        return nullptr;
    }
    return c;
}

bool write_all(int fd, const std::string &data, std::string *err) {
    size_t off = 0;
    while (off < data.size()) {
        ssize_t n = write(fd, data.data() + off, data.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            *err = std::string("write: ") + strerror(errno);
            return false;
        }
        off += size_t(n);
    }
    return true;
}

// Reads until `count` more replies have arrived. Every flood command (SET, PUBLISH)
// answers with one line (+OK, :n or -ERR ...), so counting line ends is enough, and costs
// the publishers far less CPU than building reply objects: on a small machine they compete
// with Redis and the subscribers for the same cores.
class ReplyCounter {
  public:
    bool await(int fd, uint64_t count, std::string *err) {
        while (pending_ < count) {
            ssize_t n = read(fd, buf_, sizeof buf_);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                *err = n == 0 ? "Redis closed the connection"
                              : std::string("read: ") + strerror(errno);
                return false;
            }
            for (ssize_t i = 0; i < n; i++) {
                char ch = buf_[i];
                if (line_start_ && ch == '-' && error_.empty()) error_line_ = true;
                if (error_line_ && ch == '\n') error_line_ = false;  // keep the first only
                if (error_line_ && error_.size() < 200 && ch != '\r') error_ += ch;
                line_start_ = ch == '\n';
                if (line_start_) pending_++;
            }
            if (!error_.empty()) {
                *err = "error reply: " + error_;
                return false;
            }
        }
        pending_ -= count;
        return true;
    }

  private:
    char buf_[65536];
    uint64_t pending_ = 0;  // replies read ahead of what was awaited
    bool line_start_ = true;
    bool error_line_ = false;  // inside the first error reply
    std::string error_;
};

// Sends every batch and reads every reply, keeping one batch in flight ahead of the replies
// it waits for, so Redis never idles between batches. Returns false with *err on a
// connection error or an error reply.
bool send_pipelined(redisContext *c, const std::vector<Batch> &batches, std::string *err) {
    auto counter = std::make_unique<ReplyCounter>();
    for (size_t i = 0; i < batches.size(); i++) {
        if (!write_all(c->fd, batches[i].wire, err)) return false;
        if (i > 0 && !counter->await(c->fd, batches[i - 1].count, err)) return false;
    }
    return batches.empty() || counter->await(c->fd, batches.back().count, err);
}

// P publisher threads sending the same pre-encoded commands in every run.
class Flood {
  public:
    Flood(const Options &o, std::string host, int port)
        : opts_(o), host_(std::move(host)), port_(port) {}
    ~Flood() { join(); }

    // Encodes N events split over the publishers; event i uses key i mod K.
    void build() {
        batches_.assign(opts_.publishers, {});
        uint64_t per = opts_.events / opts_.publishers;
        uint64_t rest = opts_.events % opts_.publishers;
        uint64_t next = 0;
        for (int p = 0; p < opts_.publishers; p++) {
            uint64_t n = per + (uint64_t(p) < rest ? 1 : 0);
            for (uint64_t i = 0; i < n; i++, next++) {
                if (i % opts_.batch == 0) batches_[p].emplace_back();
                Batch &b = batches_[p].back();
                std::string key = key_name(next % opts_.keys);
                if (opts_.flood == "set") {
                    append_command(b.wire, {"SET", key, "v"});
                } else {
                    append_command(b.wire, {"PUBLISH", kChannel, key});
                }
                b.count++;
            }
        }
    }

    // Connects every publisher, then releases them together.
    bool start(std::string *err) {
        join();
        std::vector<ContextPtr> conns;
        for (int p = 0; p < opts_.publishers; p++) {
            conns.push_back(connect_sync(host_, port_, err));
            if (!conns.back()) return false;
        }
        errors_.assign(opts_.publishers, std::string());
        end_ns_.assign(opts_.publishers, 0);
        cpu_ns_.assign(opts_.publishers, 0);
        finished_ = 0;
        start_ns_ = now_ns();
        for (int p = 0; p < opts_.publishers; p++) {
            threads_.emplace_back([this, p, c = std::move(conns[p])]() {
                send_pipelined(c.get(), batches_[p], &errors_[p]);
                end_ns_[p] = now_ns();
                cpu_ns_[p] = thread_cpu_ns();
                finished_.fetch_add(1, std::memory_order_release);
            });
        }
        return true;
    }
    bool done() const {
        return finished_.load(std::memory_order_acquire) == size_t(opts_.publishers);
    }
    void join() {
        for (auto &t : threads_) t.join();
        threads_.clear();
    }
    // After join(): duration of the flood and the first publisher error, if any.
    double seconds() const {
        int64_t end = *std::max_element(end_ns_.begin(), end_ns_.end());
        return double(end - start_ns_) / 1e9;
    }
    int64_t cpu_ns() const {
        int64_t sum = 0;
        for (int64_t c : cpu_ns_) sum += c;
        return sum;
    }
    std::string error() const {
        for (const auto &e : errors_)
            if (!e.empty()) return e;
        return "";
    }

  private:
    const Options &opts_;
    std::string host_;
    int port_;
    std::vector<std::vector<Batch>> batches_;
    std::vector<std::thread> threads_;
    std::vector<std::string> errors_;
    std::vector<int64_t> end_ns_;
    std::vector<int64_t> cpu_ns_;  // CPU time each publisher thread used
    std::atomic<size_t> finished_{0};
    int64_t start_ns_ = 0;
};

// Writes every key of the SET flood once, so that the measured SETs only overwrite.
bool populate_keys(const Options &o, const std::string &host, int port, std::string *err) {
    ContextPtr c = connect_sync(host, port, err);
    if (!c) return false;
    std::vector<Batch> batches;
    for (uint64_t i = 0; i < std::min(o.keys, o.events); i++) {
        if (i % o.batch == 0) batches.emplace_back();
        append_command(batches.back().wire, {"SET", key_name(i), "v"});
        batches.back().count++;
    }
    return send_pipelined(c.get(), batches, err);
}

// ---- What Redis says --------------------------------------------------------------------

// The raw subscriber names its connection so that Redis' figures can be told apart when
// both subscribers share a run.
const char *const kRawClientName = "kwbench-raw";

// Peak output-buffer memory (CLIENT LIST omem) of the pubsub clients during a run: the raw
// subscriber's and the largest of the others (keywatch's).
class OmemSampler {
  public:
    bool connect(const std::string &host, int port, std::string *err) {
        c_ = connect_sync(host, port, err);
        return c_ != nullptr;
    }
    void reset() { peak_raw_ = peak_other_ = 0; }
    void sample() {
        auto *r = static_cast<redisReply *>(redisCommand(c_.get(), "CLIENT LIST TYPE pubsub"));
        if (!r) return;
        if (r->type == REDIS_REPLY_STRING) {
            std::string text(r->str, r->len);
            size_t start = 0;
            while (start < text.size()) {
                size_t end = text.find('\n', start);
                if (end == std::string::npos) end = text.size();
                std::string line = text.substr(start, end - start);
                start = end + 1;
                size_t pos = line.find(" omem=");
                if (pos == std::string::npos) continue;
                int64_t omem = std::strtoll(line.c_str() + pos + 6, nullptr, 10);
                int64_t &peak = is_raw(line) ? peak_raw_ : peak_other_;
                peak = std::max(peak, omem);
            }
        }
        freeReplyObject(r);
    }
    int64_t peak(bool raw) const { return raw ? peak_raw_ : peak_other_; }

    static bool is_raw(const std::string &client_info) {
        return client_info.find(std::string(" name=") + kRawClientName + " ") != std::string::npos;
    }

  private:
    ContextPtr c_;
    int64_t peak_raw_ = 0, peak_other_ = 0;
};

// Redis logs "Client <info> scheduled to be closed ASAP for overcoming of output buffer
// limits." for each client it drops that way (7.0 has no INFO counter for it). Counts the
// lines for the raw subscriber (raw = true) or for the other clients.
int count_overflow_closes(const std::string &dir, bool raw) {
    std::ifstream f(dir + "/redis.log");
    std::string line;
    int n = 0;
    while (std::getline(f, line))
        if (line.find("output buffer limits") != std::string::npos &&
            OmemSampler::is_raw(line) == raw)
            n++;
    return n;
}

std::string info_field(const keywatch::RedisProcess &rp, const std::string &section,
                       const std::string &name) {
    std::string info = rp.command({"INFO", section});
    size_t pos = info.find(name + ":");
    if (pos == std::string::npos) return "?";
    size_t end = info.find_first_of("\r\n", pos);
    return info.substr(pos + name.size() + 1, end - pos - name.size() - 1);
}

// ---- Subscribers ------------------------------------------------------------------------

class Subscriber {
  public:
    virtual ~Subscriber() = default;
    virtual const char *name() const = 0;
    // Connected and subscribed when it returns true.
    virtual bool start(std::string *err) = 0;
    virtual void stop() = 0;
    virtual int disconnects() const = 0;
    virtual std::string disconnect_detail() const = 0;
    // CPU time of the subscriber's own thread so far, or -1 when it is not one thread.
    virtual int64_t thread_cpu_ns() const { return -1; }
};

// The baseline: a plain hiredis async subscriber on its own libevent loop, counting
// pmessages in the reply callback.
class RawSubscriber : public Subscriber {
  public:
    RawSubscriber(std::string host, int port, Counter *counter)
        : host_(std::move(host)), port_(port), counter_(counter) {}
    ~RawSubscriber() override { stop(); }

    const char *name() const override { return "raw"; }

    bool start(std::string *err) override {
        thread_ = std::thread([this] { run(); });
        int64_t deadline = now_ns() + 5'000'000'000;
        while (state_.load() == kStarting && now_ns() < deadline) sleep_ms(1);
        if (state_.load() == kReady) return true;
        stop();
        std::lock_guard<std::mutex> lock(mu_);
        *err = "raw subscriber: " + (detail_.empty() ? "no PSUBSCRIBE reply in 5s" : detail_);
        return false;
    }

    void stop() override {
        if (!thread_.joinable()) return;
        stop_ = true;
        thread_.join();
    }

    int disconnects() const override { return disconnects_.load(); }
    std::string disconnect_detail() const override {
        std::lock_guard<std::mutex> lock(mu_);
        return detail_;
    }
    int64_t thread_cpu_ns() const override {
        clockid_t clock;
        if (!thread_.joinable() ||
            pthread_getcpuclockid(const_cast<std::thread &>(thread_).native_handle(), &clock))
            return -1;
        return cpu_clock_ns(clock);
    }

  private:
    enum { kStarting, kReady, kFailed };

    void fail(const std::string &why) {
        {
            std::lock_guard<std::mutex> lock(mu_);
            detail_ = why;
        }
        int expected = kStarting;
        state_.compare_exchange_strong(expected, kFailed);
    }

    void run() {
        event_base *base = event_base_new();
        tick_ = event_new(base, -1, EV_PERSIST, on_tick, this);
        timeval tv{0, 20000};
        event_add(tick_, &tv);
        ac_ = redisAsyncConnect(host_.c_str(), port_);
        if (!ac_ || ac_->err) {
            fail(std::string("connect: ") + (ac_ ? ac_->errstr : "out of memory"));
            if (ac_) redisAsyncFree(ac_);
            ac_ = nullptr;
        } else {
            ac_->data = this;
            redisLibeventAttach(ac_, base);
            redisAsyncSetConnectCallback(ac_, on_connect);
            redisAsyncSetDisconnectCallback(ac_, on_disconnect);
            redisAsyncCommand(ac_, nullptr, nullptr, "CLIENT SETNAME %s", kRawClientName);
            redisAsyncCommand(ac_, on_reply, this, "PSUBSCRIBE %s", kPattern);
        }
        event_base_dispatch(base);
        event_free(tick_);
        event_base_free(base);
    }

    static void on_connect(const redisAsyncContext *ac, int status) {
        auto *self = static_cast<RawSubscriber *>(ac->data);
        if (status != REDIS_OK) {
            // hiredis frees the context after this callback, without a disconnect callback.
            self->fail(std::string("connect: ") + ac->errstr);
            self->ac_ = nullptr;
        }
    }

    static void on_disconnect(const redisAsyncContext *ac, int status) {
        auto *self = static_cast<RawSubscriber *>(ac->data);
        self->ac_ = nullptr;
        if (status == REDIS_OK) return;  // our own redisAsyncDisconnect
        self->disconnects_++;
        self->fail(std::string("disconnected: ") + ac->errstr);
    }

    static void on_reply(redisAsyncContext *, void *reply, void *privdata) {
        auto *self = static_cast<RawSubscriber *>(privdata);
        auto *r = static_cast<redisReply *>(reply);
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 3) return;
        const redisReply *kind = r->element[0];
        if (kind->len == 8 && memcmp(kind->str, "pmessage", 8) == 0) {
            self->counter_->hit();
        } else if (kind->len == 10 && memcmp(kind->str, "psubscribe", 10) == 0) {
            self->state_ = kReady;
        }
    }

    static void on_tick(evutil_socket_t, short, void *arg) {
        auto *self = static_cast<RawSubscriber *>(arg);
        if (!self->stop_.load() && self->state_.load() != kFailed) return;
        if (self->ac_) redisAsyncDisconnect(self->ac_);  // calls on_disconnect(REDIS_OK)
        event_del(self->tick_);                          // nothing left: the loop ends
    }

    std::string host_;
    int port_;
    Counter *counter_;
    std::thread thread_;
    event *tick_ = nullptr;
    redisAsyncContext *ac_ = nullptr;  // loop thread only
    std::atomic<int> state_{kStarting};
    std::atomic<bool> stop_{false};
    std::atomic<int> disconnects_{0};
    mutable std::mutex mu_;
    std::string detail_;
};

}  // namespace

// The handler under test: a C function that only counts.
extern "C" {
static int bench_noop_handler(kw_event_t *ev, void *opaque) {
    (void)ev;
    static_cast<Counter *>(opaque)->hit();
    return KW_RESULT_ACK;
}
}

namespace {

// keywatch through its C API: one engine, one handler for the flood's event.
class KeywatchSubscriber : public Subscriber {
  public:
    KeywatchSubscriber(const Options &o, std::string url, Counter *counter)
        : opts_(o), url_(std::move(url)), counter_(counter) {}
    ~KeywatchSubscriber() override { stop(); }

    const char *name() const override { return "keywatch"; }

    bool start(std::string *err) override {
        char msg[512] = "";
        auto fail = [&](const std::string &what) {
            *err = "keywatch: " + what;
            kw_engine_free(engine_);
            engine_ = nullptr;
            return false;
        };
        kw_conf_t *conf = kw_conf_new();
        if (!conf) return fail("kw_conf_new: out of memory");
        std::vector<std::pair<std::string, std::string>> settings = {{"redis.url", url_}};
        settings.insert(settings.end(), opts_.conf.begin(), opts_.conf.end());
        for (const auto &[name, value] : settings) {
            if (kw_conf_set(conf, name.c_str(), value.c_str(), msg, sizeof msg) != KW_OK) {
                kw_conf_free(conf);
                return fail("--conf " + name + ": " + msg);
            }
        }
        int rc = kw_engine_new(conf, &engine_, msg, sizeof msg);
        kw_conf_free(conf);
        if (rc != KW_OK) return fail(std::string("kw_engine_new: ") + msg);

        kw_filter_t *filter = kw_filter_new();
        rc = filter ? kw_filter_set(filter, "events", kEvent, msg, sizeof msg) : KW_ERR_NOMEM;
        if (rc != KW_OK) {
            kw_filter_free(filter);
            return fail(std::string("kw_filter_set events: ") + msg);
        }
        rc = kw_engine_add_handler(engine_, filter, bench_noop_handler, counter_, nullptr);
        kw_filter_free(filter);
        if (rc == KW_OK) rc = kw_engine_set_state_cb(engine_, on_state, this);
        if (rc == KW_OK) rc = kw_engine_set_log_cb(engine_, on_log, this);
        if (rc == KW_OK) rc = kw_engine_start(engine_);
        if (rc != KW_OK)
            return fail(std::string(kw_err_name(rc)) + ": " + kw_engine_last_error(engine_));
        return true;
    }

    // Stops the engine and keeps its final statistics.
    void stop() override {
        if (!engine_) return;
        int rc = kw_engine_stop(engine_, 5000);
        if (rc != KW_OK)
            fprintf(stderr, "keywatch: kw_engine_stop: %s: %s\n", kw_err_name(rc),
                    kw_engine_last_error(engine_));
        for (const char *name : {"events.received", "events.delivered", "events.dropped",
                                 "events.abandoned", "handler.errors", "conn.reconnects"}) {
            int64_t v = 0;
            stats_[name] = kw_engine_stat(engine_, name, &v) == KW_OK ? v : -1;
        }
        kw_engine_free(engine_);
        engine_ = nullptr;
    }

    int disconnects() const override { return broken_.load(); }
    std::string disconnect_detail() const override {
        std::lock_guard<std::mutex> lock(mu_);
        return detail_;
    }
    // After stop(); -1 when the engine does not know the name.
    int64_t stat(const std::string &name) const {
        auto it = stats_.find(name);
        return it == stats_.end() ? -1 : it->second;
    }

  private:
    static void on_state(const char *node, kw_conn_state state, const char *detail, void *opaque) {
        auto *self = static_cast<KeywatchSubscriber *>(opaque);
        if (state != KW_CONN_BROKEN) return;
        self->broken_++;
        std::lock_guard<std::mutex> lock(self->mu_);
        self->detail_ = std::string(node ? node : "?") + ": " + (detail ? detail : "");
    }

    static void on_log(kw_log_level level, const char *message, void *opaque) {
        auto *self = static_cast<KeywatchSubscriber *>(opaque);
        if (level < KW_LOG_WARN && !self->opts_.verbose) return;
        static const char *const names[] = {"debug", "info", "warn", "error"};
        fprintf(stderr, "keywatch [%s]: %s\n", names[level & 3], message);
    }

    const Options &opts_;
    std::string url_;
    Counter *counter_;
    kw_engine_t *engine_ = nullptr;
    std::map<std::string, int64_t> stats_;
    std::atomic<int> broken_{0};
    mutable std::mutex mu_;
    std::string detail_;
};

// ---- One run ----------------------------------------------------------------------------

struct RunResult {
    std::string who;
    bool ok = false;  // the run happened (false: setup failed, see note)
    uint64_t received = 0;
    double seconds = 0;     // first to last event
    double rate = 0;        // events/s
    double flood_rate = 0;  // events/s Redis accepted from the publishers
    int64_t peak_omem = 0;
    double cpu_ns_per_event = -1;        // this subscriber's CPU (all its threads)
    double redis_cpu_ns_per_event = -1;  // redis-server's CPU during the run
    int disconnects = 0;                 // raw: disconnect callback; keywatch: BROKEN states
    int64_t reconnects = 0;              // keywatch: conn.reconnects
    int64_t dropped = 0;                 // keywatch: events.dropped
    int overflow_closes = 0;             // Redis log: closed for output buffer limits
    std::string note;
};

// One subscriber taking part in a run, with its own counter.
struct Participant {
    std::unique_ptr<Subscriber> sub;
    std::unique_ptr<Counter> counter = std::make_unique<Counter>();
    int64_t last_change_ns = 0;  // when the monitor last saw the count move
    RunResult res;
};

class Bench {
  public:
    Bench(const Options &o, keywatch::RedisProcess &rp)
        : opts_(o), rp_(rp), flood_(o, rp.host(), rp.port()) {}

    bool prepare(std::string *err) {
        if (opts_.flood == "set" && !populate_keys(opts_, rp_.host(), rp_.port(), err))
            return false;
        flood_.build();
        return sampler_.connect(rp_.host(), rp_.port(), err);
    }

    // Runs one flood with the given subscribers (raw = true: the raw one) subscribed.
    std::vector<RunResult> run(const std::vector<bool> &kinds) {
        std::vector<Participant> parts(kinds.size());
        std::vector<RunResult> out;
        for (size_t i = 0; i < kinds.size(); i++) {
            Participant &p = parts[i];
            p.counter->reset(opts_.events);
            if (kinds[i]) {
                p.sub = std::make_unique<RawSubscriber>(rp_.host(), rp_.port(), p.counter.get());
            } else {
                p.sub = std::make_unique<KeywatchSubscriber>(opts_, rp_.url(), p.counter.get());
            }
            p.res.who = p.sub->name();
        }
        std::string err;
        for (Participant &p : parts) {
            if (!p.sub->start(&err)) return failed(parts, err);
        }
        int closes_raw = count_overflow_closes(rp_.dir(), true);
        int closes_other = count_overflow_closes(rp_.dir(), false);
        sampler_.reset();
        // CPU: the process, minus the publishers and this (monitor) thread, is what the
        // subscribers used; a raw subscriber's thread has its own clock.
        double redis_cpu_before = redis_cpu_seconds();
        int64_t proc_before = process_cpu_ns(), main_before = thread_cpu_ns();
        std::vector<int64_t> thread_before;
        for (Participant &p : parts) thread_before.push_back(p.sub->thread_cpu_ns());
        if (!flood_.start(&err)) return failed(parts, err);
        wait_for_events(parts);
        flood_.join();
        int64_t others_cpu =
            process_cpu_ns() - proc_before - flood_.cpu_ns() - (thread_cpu_ns() - main_before);
        double redis_cpu = redis_cpu_seconds() - redis_cpu_before;
        bool split = true;  // every single-thread subscriber's clock could be read
        for (size_t i = 0; i < parts.size(); i++) {
            if (thread_before[i] < 0) continue;
            int64_t after = parts[i].sub->thread_cpu_ns();
            if (after < 0) {
                split = false;
                continue;
            }
            parts[i].res.cpu_ns_per_event = double(after - thread_before[i]) / double(opts_.events);
            others_cpu -= after - thread_before[i];
        }
        double flood_seconds = flood_.seconds();
        for (size_t i = 0; i < parts.size(); i++) {
            Participant &p = parts[i];
            if (thread_before[i] < 0 && split)
                p.res.cpu_ns_per_event = double(others_cpu) / double(opts_.events);
            p.res.redis_cpu_ns_per_event = redis_cpu * 1e9 / double(opts_.events);
            p.sub->stop();
            bool raw = std::string(p.res.who) == "raw";
            p.res.flood_rate = flood_seconds > 0 ? double(opts_.events) / flood_seconds : 0;
            p.res.peak_omem = sampler_.peak(raw);
            p.res.overflow_closes =
                count_overflow_closes(rp_.dir(), raw) - (raw ? closes_raw : closes_other);
            collect(&p);
            p.res.ok = true;
            out.push_back(p.res);
        }
        return out;
    }

  private:
    double redis_cpu_seconds() {
        return std::atof(info_field(rp_, "cpu", "used_cpu_user").c_str()) +
               std::atof(info_field(rp_, "cpu", "used_cpu_sys").c_str());
    }

    std::vector<RunResult> failed(std::vector<Participant> &parts, const std::string &err) {
        std::vector<RunResult> out;
        for (Participant &p : parts) {
            p.sub->stop();
            p.res.note = err;
            out.push_back(p.res);
        }
        return out;
    }

    // Until every subscriber has every event, or nothing came for idle_ms after the flood,
    // or timeout.
    void wait_for_events(std::vector<Participant> &parts) {
        const int64_t start = now_ns();
        const int64_t idle = int64_t(opts_.idle_ms) * 1'000'000;
        const int64_t timeout = int64_t(opts_.timeout_s) * 1'000'000'000;
        std::vector<uint64_t> seen(parts.size(), 0);
        int64_t last_change = start, next_sample = start;
        bool flood_done_seen = false;
        for (;;) {
            int64_t now = now_ns();
            bool all = true;
            for (size_t i = 0; i < parts.size(); i++) {
                uint64_t c = parts[i].counter->count.load(std::memory_order_relaxed);
                if (c != seen[i]) {
                    seen[i] = c;
                    last_change = now;
                    parts[i].last_change_ns = now;
                }
                all = all && c >= opts_.events;
            }
            if (all) break;
            if (flood_.done() && !flood_done_seen) {
                flood_done_seen = true;
                last_change = std::max(last_change, now);
            }
            if (flood_done_seen && now - last_change > idle) break;
            if (now - start > timeout) break;
            if (now >= next_sample) {
                sampler_.sample();
                next_sample = now + 100'000'000;
            }
            sleep_ms(2);
        }
    }

    void collect(Participant *p) {
        RunResult *res = &p->res;
        const Counter &counter = *p->counter;
        res->received = counter.count.load();
        res->disconnects = p->sub->disconnects();
        int64_t first = counter.first_ns.load();
        // An incomplete run ends at the monitor's last observed change (2 ms resolution).
        int64_t last = res->received >= opts_.events ? counter.last_ns.load() : p->last_change_ns;
        if (res->received > 1 && last > first) {
            res->seconds = double(last - first) / 1e9;
            res->rate = double(res->received - 1) / res->seconds;
        }
        std::string notes;
        if (res->received < opts_.events)
            notes += "INCOMPLETE " + std::to_string(res->received) + "/" +
                     std::to_string(opts_.events) + "; ";
        if (res->received > opts_.events)
            notes += "more events than published (" + std::to_string(res->received) + "); ";
        if (res->disconnects) notes += "disconnect: " + p->sub->disconnect_detail() + "; ";
        std::string ferr = flood_.error();
        if (!ferr.empty()) notes += "publisher: " + ferr + "; ";
        if (auto *kw = dynamic_cast<const KeywatchSubscriber *>(p->sub.get())) {
            res->reconnects = kw->stat("conn.reconnects");
            res->dropped = kw->stat("events.dropped");
            int64_t received = kw->stat("events.received");
            int64_t delivered = kw->stat("events.delivered");
            if (received >= 0 && uint64_t(received) != opts_.events)
                notes += "engine received " + std::to_string(received) + "; ";
            if (delivered >= 0 && uint64_t(delivered) != res->received)
                notes += "engine delivered " + std::to_string(delivered) + "; ";
            if (kw->stat("handler.errors") > 0)
                notes += "handler.errors " + std::to_string(kw->stat("handler.errors")) + "; ";
            if (kw->stat("events.abandoned") > 0)
                notes += "abandoned " + std::to_string(kw->stat("events.abandoned")) + "; ";
        }
        res->note = notes;
    }

    const Options &opts_;
    keywatch::RedisProcess &rp_;
    Flood flood_;
    OmemSampler sampler_;
};

void print_run(const std::string &round, const RunResult &r) {
    if (!r.ok) {
        printf("%-7s %-9s FAILED: %s\n", round.c_str(), r.who.c_str(), r.note.c_str());
        return;
    }
    bool raw = r.who == "raw";
    printf("%-7s %-9s %10llu %9.3f %12s %12s %7.0f %7.0f %9.1f %5d %6s %6s %6d  %s\n",
           round.c_str(), r.who.c_str(), static_cast<unsigned long long>(r.received), r.seconds,
           with_commas(r.rate).c_str(), with_commas(r.flood_rate).c_str(), r.cpu_ns_per_event,
           r.redis_cpu_ns_per_event, double(r.peak_omem) / (1 << 20), r.disconnects,
           raw ? "-" : std::to_string(r.reconnects).c_str(),
           raw ? "-" : std::to_string(r.dropped).c_str(), r.overflow_closes, r.note.c_str());
    fflush(stdout);
}

// The 1, 5 and 15 minute load averages: other work on the machine skews every figure.
std::string load_average() {
    std::ifstream f("/proc/loadavg");
    std::string one, five, fifteen;
    f >> one >> five >> fifteen;
    return one + " " + five + " " + fifteen;
}

void print_header(const keywatch::RedisProcess &rp, const Options &opts) {
    std::string limits = rp.command({"CONFIG", "GET", "client-output-buffer-limit"});
    limits = limits.substr(limits.find('\n') + 1);
    std::string notify = rp.command({"CONFIG", "GET", "notify-keyspace-events"});
    notify = notify.substr(notify.find('\n') + 1);
    printf(
        "kw_bench_watch: keywatch %s, redis-server %s on port %d, %u cores, load average "
        "%s\n",
        kw_version_string(), info_field(rp, "server", "redis_version").c_str(), rp.port(),
        std::thread::hardware_concurrency(), load_average().c_str());
    printf("  notify-keyspace-events=%s  client-output-buffer-limit: %s\n", notify.c_str(),
           limits.c_str());
    std::string what = opts.flood == "set"
                           ? "SET kwbench:<n> v over " + std::to_string(opts.keys) + " keys"
                           : "PUBLISH __keyevent@0__:set kwbench:<n>";
    printf(
        "  flood: %llu x %s per run, %d pipelining publishers (batch %d); "
        "subscribers: PSUBSCRIBE %s\n",
        static_cast<unsigned long long>(opts.events), what.c_str(), opts.publishers, opts.batch,
        kPattern);
    if (opts.pin) printf("  pinned: redis-server on CPU 0, the benchmark on the others\n");
    printf("  mode: %s\n", opts.mode == "alternate"
                               ? "alternate (raw and keywatch in turn, each alone with the flood)"
                               : "same-run (raw and keywatch subscribed to the same flood)");
    for (const auto &[name, value] : opts.conf)
        printf("  keywatch conf %s=%s\n", name.c_str(), value.c_str());
}

// Medians, the ratio and the verdict.
void print_summary(const Options &opts, const std::vector<RunResult> &raw_runs,
                   const std::vector<RunResult> &kw_runs) {
    std::vector<double> raw_rates, kw_rates, ratios, raw_cpu, kw_cpu, redis_raw, redis_kw;
    int raw_disc = 0, kw_disc = 0, raw_closes = 0, kw_closes = 0;
    int kw_incomplete = 0, raw_incomplete = 0;
    int64_t drops = 0, reconnects = 0, peak_omem = 0;
    for (size_t i = 0; i < raw_runs.size(); i++) {
        const RunResult &a = raw_runs[i], &b = kw_runs[i];
        raw_rates.push_back(a.rate);
        kw_rates.push_back(b.rate);
        if (a.rate > 0) ratios.push_back(b.rate / a.rate);
        if (a.cpu_ns_per_event >= 0) raw_cpu.push_back(a.cpu_ns_per_event);
        if (b.cpu_ns_per_event >= 0) kw_cpu.push_back(b.cpu_ns_per_event);
        redis_raw.push_back(a.redis_cpu_ns_per_event);
        redis_kw.push_back(b.redis_cpu_ns_per_event);
        raw_disc += a.disconnects;
        kw_disc += b.disconnects;
        raw_closes += a.overflow_closes;
        kw_closes += b.overflow_closes;
        drops += std::max<int64_t>(0, b.dropped);
        reconnects += std::max<int64_t>(0, b.reconnects);
        peak_omem = std::max(peak_omem, b.peak_omem);
        raw_incomplete += a.received < opts.events;
        kw_incomplete += b.received < opts.events;
    }
    double raw_med = median(raw_rates), kw_med = median(kw_rates);
    double ratio = raw_med > 0 ? 100.0 * kw_med / raw_med : 0;

    std::vector<std::string> failures;
    if (ratio < 90.0) failures.push_back("keywatch below 90% of raw");
    if (kw_closes) failures.push_back("Redis closed keywatch for output buffer limits");
    if (kw_disc || reconnects) failures.push_back("keywatch disconnected");
    if (drops) failures.push_back("keywatch dropped events");
    if (kw_incomplete) failures.push_back("keywatch runs missed events");
    if (raw_disc || raw_incomplete || raw_closes) failures.push_back("raw baseline incomplete");

    printf("\nsummary (%s) over %d rounds of %llu events:\n", opts.mode.c_str(), opts.rounds,
           static_cast<unsigned long long>(opts.events));
    auto range = [](const std::vector<double> &v) {
        auto [lo, hi] = std::minmax_element(v.begin(), v.end());
        return "(runs " + with_commas(*lo) + " .. " + with_commas(*hi) + ")";
    };
    printf("  median raw       %12s events/s  %s\n", with_commas(raw_med).c_str(),
           range(raw_rates).c_str());
    printf("  median keywatch  %12s events/s  %s\n", with_commas(kw_med).c_str(),
           range(kw_rates).c_str());
    printf(
        "  keywatch / raw   %11.1f %%   (median of the per-round ratios %.1f %%; "
        "target >= 90 %%)\n",
        ratio, 100.0 * median(ratios));
    double raw_cpu_med = median(raw_cpu), kw_cpu_med = median(kw_cpu);
    printf(
        "  CPU per event (median): raw subscriber %.0f ns, keywatch %.0f ns (%.2fx); "
        "redis-server %.0f ns in raw runs, %.0f ns in keywatch runs\n",
        raw_cpu_med, kw_cpu_med, raw_cpu_med > 0 ? kw_cpu_med / raw_cpu_med : 0, median(redis_raw),
        median(redis_kw));
    printf(
        "  keywatch: dropped %lld, disconnects %d, reconnects %lld, output-buffer-limit "
        "closes %d, incomplete runs %d, peak omem %.1f MB\n",
        static_cast<long long>(drops), kw_disc, static_cast<long long>(reconnects), kw_closes,
        kw_incomplete, double(peak_omem) / (1 << 20));
    printf("  raw:      disconnects %d, output-buffer-limit closes %d, incomplete runs %d\n",
           raw_disc, raw_closes, raw_incomplete);
    printf("  load average at the end: %s\n", load_average().c_str());
    if (failures.empty()) {
        printf("RESULT: PASS\n");
    } else {
        std::string why;
        for (const auto &f : failures) why += (why.empty() ? "" : "; ") + f;
        printf("RESULT: FAIL (%s)\n", why.c_str());
    }
}

// Redis' main thread on CPU 0; this thread, and so every thread it starts later, on the
// others.
bool pin_cpus(pid_t redis_pid) {
    int ncpu = int(std::thread::hardware_concurrency());
    if (ncpu < 2) {
        fprintf(stderr, "kw_bench_watch: --pin needs at least 2 CPUs\n");
        return false;
    }
    cpu_set_t redis_set, ours;
    CPU_ZERO(&redis_set);
    CPU_ZERO(&ours);
    CPU_SET(0, &redis_set);
    for (int c = 1; c < ncpu; c++) CPU_SET(c, &ours);
    if (sched_setaffinity(redis_pid, sizeof redis_set, &redis_set) != 0 ||
        sched_setaffinity(0, sizeof ours, &ours) != 0) {
        fprintf(stderr, "kw_bench_watch: --pin: sched_setaffinity: %s\n", strerror(errno));
        return false;
    }
    return true;
}

int run_bench(const Options &opts) {
    keywatch::RedisProcess::Options ro;
    ro.notify = opts.notify;
    keywatch::RedisProcess rp(ro);
    rp.start();
    if (opts.pin && !pin_cpus(rp.pid())) return 1;
    print_header(rp, opts);

    Bench bench(opts, rp);
    std::string err;
    if (!bench.prepare(&err)) {
        fprintf(stderr, "kw_bench_watch: %s\n", err.c_str());
        return 1;
    }

    printf("\n%-7s %-9s %10s %9s %12s %12s %7s %7s %9s %5s %6s %6s %6s\n", "round", "who",
           "received", "seconds", "events/s", "flood ev/s", "cpu/ev", "rcpu/ev", "omem MB", "disc",
           "reconn", "drops", "oflow");
    std::vector<RunResult> raw_runs, kw_runs;
    for (int i = 0; i < opts.warmup + opts.rounds; i++) {
        bool counted = i >= opts.warmup;
        std::string label = counted ? std::to_string(i - opts.warmup + 1) : "warm-up";
        // Alternate which goes first, so slow drift in the machine does not favour one.
        bool raw_first = i % 2 == 0;
        std::vector<std::vector<bool>> runs;
        if (!opts.only.empty())
            runs = {{opts.only == "raw"}};
        else if (opts.mode == "alternate")
            runs = {{raw_first}, {!raw_first}};
        else
            runs = {{raw_first, !raw_first}};
        for (const auto &kinds : runs) {
            for (const RunResult &r : bench.run(kinds)) {
                print_run(label, r);
                if (!r.ok) return 1;
                if (counted) (r.who == "raw" ? raw_runs : kw_runs).push_back(r);
            }
        }
    }
    if (opts.only.empty()) {
        print_summary(opts, raw_runs, kw_runs);
    } else {
        std::vector<double> rates;
        for (const RunResult &r : opts.only == "raw" ? raw_runs : kw_runs) rates.push_back(r.rate);
        printf("\nmedian %s %s events/s (--only: no comparison)\n", opts.only.c_str(),
               with_commas(median(rates)).c_str());
    }
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    Options opts;
    if (!parse_args(argc, argv, &opts)) return 1;
    signal(SIGPIPE, SIG_IGN);
    evthread_use_pthreads();
    try {
        return run_bench(opts);
    } catch (const std::exception &e) {
        fprintf(stderr, "kw_bench_watch: %s\n", e.what());
        return 1;
    }
}
