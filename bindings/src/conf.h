// A kw_conf_t built from Python keyword options, owned (freed on destruction). Names are
// the C API's option names; a Python-style name with '_' for the first '.' is accepted
// too (retry_base -> retry.base, dispatch_queue_size -> dispatch.queue_size).
// Not thread-safe (used while a Client or Engine is being made).
#pragma once

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

  private:
    void set(const std::string &name, const std::string &value);
    kw_conf_t *conf_;
};

}  // namespace keywatch::python
