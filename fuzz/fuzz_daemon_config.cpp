// Fuzz target: the daemon's TOML configuration (`keywatch run --config`), through toml++
// and the loader's checks (cli/daemon/daemon_config.h). Properties: a refused file has a
// message that names the file; an accepted one holds only engine options that kw_conf_set
// accepts again, in a fresh configuration, and that kw_engine_new accepts together; every
// handler has a plugin, an instance name (given or made from the plugin) that the plugin
// loader accepts and no other handler has, one place per option, and a filter that
// kw_filter_set accepts again; the HTTP address is host:port.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "keywatch.h"
#include "cli/daemon/daemon_config.h"
#include "core/plugins/plugin_set.h"
#include "fuzz/check.h"

namespace {

void check_engine_options(const keywatch::cli::DaemonConfig &config) {
    char err[512];
    kw_conf_t *conf = kw_conf_new();
    for (auto &[name, value] : config.engine)
        KW_FUZZ_CHECK(kw_conf_set(conf, name.c_str(), value.c_str(), err, sizeof err) == KW_OK,
                      "an accepted engine option is accepted again");
    KW_FUZZ_CHECK(config.engine.size() == config.engine_places.size(), "one place per option");
    kw_engine_t *engine = nullptr;
    KW_FUZZ_CHECK(kw_engine_new(conf, &engine, err, sizeof err) == KW_OK,
                  "accepted options are accepted together");
    kw_engine_free(engine);
    kw_conf_free(conf);
}

void check_handlers(const keywatch::cli::DaemonConfig &config) {
    std::set<std::string> names;
    char err[512];
    for (auto &h : config.handlers) {
        KW_FUZZ_CHECK(!h.plugin.empty(), "a handler has a plugin");
        const std::string name = keywatch::cli::instance_name(h);
        KW_FUZZ_CHECK(keywatch::valid_instance_name(name), "an instance name the loader accepts");
        KW_FUZZ_CHECK(names.insert(name).second, "handler names are unique");
        KW_FUZZ_CHECK(h.options.size() == h.option_places.size(), "one place per plugin option");
        kw_filter_t *filter = kw_filter_new();
        for (auto &[name, value] : h.filter) {
            const bool bytes = name == "prefix" || name == "glob";
            const int rc =
                bytes ? kw_filter_set_bytes(filter, name.c_str(), value.data(), value.size(), err,
                                            sizeof err)
                      : kw_filter_set(filter, name.c_str(), value.c_str(), err, sizeof err);
            KW_FUZZ_CHECK(rc == KW_OK, "an accepted filter value is accepted again");
        }
        kw_filter_free(filter);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string text(reinterpret_cast<const char *>(data), size);
    keywatch::cli::DaemonConfig config;
    std::string err;
    if (!keywatch::cli::parse_daemon_config(text, "fuzz.toml", &config, &err)) {
        KW_FUZZ_CHECK(err.find("fuzz.toml") != std::string::npos, "a refusal names the file");
        return 0;
    }
    check_engine_options(config);
    check_handlers(config);
    const std::string &listen = config.http.listen;
    KW_FUZZ_CHECK(listen.rfind(':') != std::string::npos && listen.rfind(':') + 1 < listen.size(),
                  "the HTTP address is host:port");
    return 0;
}
