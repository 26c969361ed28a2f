#include "cli/redis_target.h"

#include <exception>

namespace keywatch::cli {

RedisTarget::~RedisTarget() {
    close();
}

bool RedisTarget::open(const std::string &url, StopSignal *stop, std::string *err) {
    if (!url.empty()) {
        url_ = url;
        return true;
    }
    try {
        auto server = std::make_unique<RedisProcess>();  // notify-keyspace-events AKE
        server->start();
        stop_ = stop;
        if (stop_) stop_->set_child_pid(server->pid());
        url_ = server->url();
        server_ = std::move(server);
        return true;
    } catch (const std::exception &e) {
        *err = std::string("cannot start a private redis-server: ") + e.what() +
               " (install it with 'apt-get install redis-server', or pass --redis URL to use "
               "a running Redis)";
        return false;
    }
}

void RedisTarget::close() {
    if (!server_) return;
    server_->stop();
    if (stop_) stop_->set_child_pid(0);
    server_.reset();  // removes its temporary directory
}

std::string RedisTarget::started_message() const {
    if (!server_) return "";
    return "started a private redis-server at " + url_ + " (pid " + std::to_string(server_->pid()) +
           ", dir " + server_->dir() + "); it stops when keywatch exits";
}

bool resolve_redis_url(const std::string &flag_url,
                       std::vector<std::pair<std::string, std::string>> *conf, std::string *url,
                       std::string *err) {
    *url = flag_url;
    for (auto it = conf->begin(); it != conf->end();) {
        if (it->first != "redis.url") {
            ++it;
            continue;
        }
        if (!url->empty() && *url != it->second) {
            *err = "--redis (or KEYWATCH_REDIS_URL) names " + redact_url(*url) +
                   " and --conf redis.url names " + redact_url(it->second) +
                   ": give the server once, with --redis URL";
            return false;
        }
        *url = it->second;
        it = conf->erase(it);
    }
    return true;
}

}  // namespace keywatch::cli
