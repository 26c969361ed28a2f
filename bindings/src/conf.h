// A kw_conf_t built from Python keyword options, owned (freed on destruction), and what the
// Python layer reads of the library's option table through it: every option's default
// (kw_conf_dump) and the library's own duration parser. Names are the C API's option names
// (the Python layer maps retry_base to retry.base before they get here).
// Not thread-safe (used while a Client or Engine is being made); the free functions are.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "keywatch.h"

namespace keywatch::python {

class Conf {
  public:
    // Throws StatusError naming the option and the value when one is refused.
    explicit Conf(const std::map<std::string, std::string> &options);
    ~Conf();
    Conf(const Conf &) = delete;
    Conf &operator=(const Conf &) = delete;

    const kw_conf_t *get() const { return conf_; }
    // Every option's current value as text, passwords (also inside redis.url) as "***".
    std::map<std::string, std::string> values() const;

  private:
    kw_conf_t *conf_;
};

// Every option the library knows, with its default as text (kw_conf_dump).
std::map<std::string, std::string> option_defaults();

// A duration in the library's text ("250ms", "30s", "5m") as milliseconds, read by the
// library's own parser (a duration option set on a scratch configuration and read back),
// so Python takes exactly the texts the options take. Throws StatusError(KW_ERR_BAD_VALUE)
// with the library's message, without the option's name.
int64_t duration_ms(const std::string &text);

}  // namespace keywatch::python
