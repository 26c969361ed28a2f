// A plain blocking hiredis connection that the demo writes its keys through (the way an
// application would), separate from the engine's connections.
// Not thread-safe: one owner thread.
#pragma once

#include <hiredis/hiredis.h>

#include <memory>
#include <string>
#include <vector>

namespace keywatch::cli {

class RedisWriter {
  public:
    // Connects to a redis:// or unix:// URL, AUTHs and SELECTs its db. False with *err.
    bool connect(const std::string &url, std::string *err);
    // Runs one command (binary-safe arguments). Returns false with *err on a connection
    // failure or an error reply; *reply (may be null) gets the integer or text reply.
    bool command(const std::vector<std::string> &args, std::string *reply, std::string *err);

  private:
    struct ContextFree {
        void operator()(redisContext *c) const { redisFree(c); }
    };
    std::unique_ptr<redisContext, ContextFree> ctx_;
};

}  // namespace keywatch::cli
