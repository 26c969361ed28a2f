// The daemon's config file (cli/daemon/daemon_config.h): what a good file becomes, every
// kind of error with its message (file:line:column, the key, the valid names, the quoted
// value), and the shipped examples/keywatch.toml.
#include "cli/daemon/daemon_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace keywatch::cli {
namespace {

// Parses text as "kw.toml"; the error ("" when it parses).
std::string error_of(const std::string &text, DaemonConfig *out = nullptr) {
    DaemonConfig scratch;
    std::string err;
    bool ok = parse_daemon_config(text, "kw.toml", out ? out : &scratch, &err);
    EXPECT_EQ(ok, err.empty()) << err;
    return ok ? "" : err;
}

DaemonConfig parsed(const std::string &text) {
    DaemonConfig c;
    std::string err = error_of(text, &c);
    EXPECT_EQ(err, "");
    return c;
}

using Pairs = std::vector<std::pair<std::string, std::string>>;

TEST(DaemonConfig, EngineOptionsBecomeKwConfSetTextInFileOrder) {
    DaemonConfig c = parsed(
        "workers = 3\n"
        "[sweep]\n"
        "interval = \"250ms\"\n"
        "[redis]\n"
        "url = \"redis://127.0.0.1:7000\"\n"
        "[dedupe]\n"
        "enable = true\n"
        "[retry]\n"
        "max = 60000\n");
    EXPECT_EQ(c.engine, (Pairs{{"workers", "3"},
                               {"sweep.interval", "250ms"},
                               {"redis.url", "redis://127.0.0.1:7000"},
                               {"dedupe.enable", "true"},
                               {"retry.max", "60000"}}));
    ASSERT_EQ(c.engine_places.size(), 5u);
    EXPECT_EQ(c.engine_places[1].text, "kw.toml:3:12");
    EXPECT_EQ(c.engine_option("sweep.interval"), "250ms");
    EXPECT_EQ(c.engine_option("lease"), "");
    EXPECT_EQ(c.path, "kw.toml");
}

TEST(DaemonConfig, UnknownKeyIsRefusedWithASuggestionAndTheValidKeys) {
    std::string err = error_of("[sweep]\nintervall = \"1s\"\n");
    EXPECT_EQ(err,
              "kw.toml:2:1: [sweep] intervall: unknown key (did you mean 'interval'?); valid keys "
              "in [sweep]: batch, interval, scan_interval");
}

}  // namespace
}  // namespace keywatch::cli
