#include "bindings/src/conf.h"

#include <new>

#include "bindings/src/capi_seam.h"
#include "bindings/src/status_error.h"

namespace keywatch::python {

Conf::Conf(const std::map<std::string, std::string> &options) : conf_(capi::conf_new()) {
    if (!conf_) throw std::bad_alloc();
    try {
        for (const auto &[name, value] : options) set(name, value);
    } catch (...) {
        capi::conf_free(conf_);
        throw;
    }
}

Conf::~Conf() {
    capi::conf_free(conf_);
}

void Conf::set(const std::string &name, const std::string &value) {
    char err[512] = "";
    int rc = capi::conf_set(conf_, name.c_str(), value.c_str(), err, sizeof err);
    const size_t underscore = name.find('_');
    if (rc == KW_ERR_UNKNOWN_CONF && underscore != std::string::npos) {
        std::string dotted = name;
        dotted[underscore] = '.';
        char err2[512] = "";
        int rc2 = capi::conf_set(conf_, dotted.c_str(), value.c_str(), err2, sizeof err2);
        if (rc2 != KW_ERR_UNKNOWN_CONF) {
            check(rc2, err2);
            return;
        }
    }
    check(rc, err);
}

}  // namespace keywatch::python
