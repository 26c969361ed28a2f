#include "bindings/src/conf.h"

#include <new>

#include "bindings/src/capi_seam.h"
#include "bindings/src/status_error.h"

namespace keywatch::python {
namespace {

using ConfPtr = std::unique_ptr<kw_conf_t, void (*)(kw_conf_t *)>;

ConfPtr new_conf() {
    ConfPtr conf(capi::conf_new(), capi::conf_free);
    if (!conf) throw std::bad_alloc();
    return conf;
}

// Reads every option of `conf` through kw_conf_dump: its value, or its default.
std::map<std::string, std::string> dump(const kw_conf_t *conf, bool defaults) {
    struct Out {
        std::map<std::string, std::string> options;
        bool defaults;
    } out{{}, defaults};
    capi::conf_dump(
        conf,
        [](const char *name, const char *value, const char *default_value, void *opaque) {
            auto *o = static_cast<Out *>(opaque);
            o->options[name] = o->defaults ? default_value : value;
        },
        &out);
    return out.options;
}

}  // namespace

Conf::Conf(const std::map<std::string, std::string> &options) {
    ConfPtr conf = new_conf();
    for (const auto &[name, value] : options) {
        char err[512] = "";
        // The status first: as arguments of one call, err could be read before it is written.
        const int rc = capi::conf_set(conf.get(), name.c_str(), value.c_str(), err, sizeof err);
        check(rc, err);
    }
    conf_ = conf.release();
}

Conf::~Conf() {
    capi::conf_free(conf_);
}

std::map<std::string, std::string> Conf::values() const {
    return dump(conf_, false);
}

std::map<std::string, std::string> option_defaults() {
    return dump(new_conf().get(), true);
}

int64_t duration_ms(const std::string &text) {
    // stop.timeout takes every duration from 0 to the latest keywatch accepts.
    static const char kScratch[] = "stop.timeout";
    ConfPtr conf = new_conf();
    char err[512] = "";
    const int rc = capi::conf_set(conf.get(), kScratch, text.c_str(), err, sizeof err);
    if (rc != KW_OK) {
        std::string message = err;
        const std::string prefix = std::string(kScratch) + ": ";
        if (message.rfind(prefix, 0) == 0) message.erase(0, prefix.size());
        throw StatusError(rc, message);
    }
    char buf[64] = "";
    check(capi::conf_get(conf.get(), kScratch, buf, sizeof buf), "kw_conf_get failed");
    return std::stoll(buf);  // "<n>ms"
}

}  // namespace keywatch::python
