// Endpoint: where a server is, host and port (or a unix socket path), with the one spelling
// keywatch writes ("host:port", "[v6]:port" or the path) and the one parser of host:port.
// Every name of a node (logs, stats, events, map keys) is str(); every host:port read from
// a user, a listen address, CLUSTER NODES or a MOVED reply goes through parse(). Header-only
// (a pure value, used by embedded/ too, which does not link core). Thread-safe: a value.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <tuple>

namespace keywatch {

struct Endpoint {
    std::string host;       // without brackets; empty for a socket
    int port = 0;           // 0..65535
    std::string unix_path;  // a socket instead of host:port

    // Strict: an IPv6 host must be bracketed, "[::1]:6379" (what users and listen addresses
    // write). Redis: also "::1:7001", as MOVED/ASK replies and CLUSTER NODES print it.
    enum class Form { Strict, Redis };

    // "host:port" or "[v6]:port", port 0..65535. Empty on failure with *why (if given)
    // saying what is wrong and how to write it.
    static std::optional<Endpoint> parse(std::string_view text, Form form,
                                         std::string *why = nullptr);

    bool is_unix() const { return !unix_path.empty(); }
    // "host:port", "[v6]:port" or the socket path.
    std::string str() const {
        if (is_unix()) return unix_path;
        if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
        return host + ":" + std::to_string(port);
    }

    friend bool operator==(const Endpoint &a, const Endpoint &b) {
        return std::tie(a.host, a.port, a.unix_path) == std::tie(b.host, b.port, b.unix_path);
    }
    friend bool operator!=(const Endpoint &a, const Endpoint &b) { return !(a == b); }
    friend bool operator<(const Endpoint &a, const Endpoint &b) {
        return std::tie(a.host, a.port, a.unix_path) < std::tie(b.host, b.port, b.unix_path);
    }
};

inline std::optional<Endpoint> Endpoint::parse(std::string_view text, Form form, std::string *why) {
    auto refuse = [why](const char *what) -> std::optional<Endpoint> {
        if (why) *why = what;
        return std::nullopt;
    };
    std::string_view host, port;
    if (!text.empty() && text[0] == '[') {
        const size_t close = text.find(']');
        if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
            return refuse("an IPv6 address is written [address]:port, e.g. \"[::1]:9464\"");
        host = text.substr(1, close - 1);
        port = text.substr(close + 2);
        if (host.find(':') == std::string_view::npos)
            return refuse("brackets hold only an IPv6 address: write host:port for the others");
    } else {
        const size_t colon = text.rfind(':');
        if (colon == std::string_view::npos)
            return refuse("no port: write host:port, e.g. \"127.0.0.1:9464\"");
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
        if (form == Form::Strict && host.find(':') != std::string_view::npos)
            return refuse("an IPv6 address needs brackets: [address]:port, e.g. \"[::1]:9464\"");
    }
    if (host.empty())
        return refuse(
            "no host: write host:port (\"0.0.0.0:9464\" listens on every IPv4 interface)");
    if (host.find_first_of(" \t\r\n[]/@?#") != std::string_view::npos)
        return refuse("the host contains a character a host cannot have");
    int value = 0;
    for (char c : port) {
        if (c < '0' || c > '9' || port.size() > 5) {
            value = -1;
            break;
        }
        value = value * 10 + (c - '0');
    }
    if (port.empty() || value < 0 || value > 65535)
        return refuse("the port is not a number from 0 to 65535 (0: any free port)");
    Endpoint e;
    e.host = std::string(host);
    e.port = value;
    return e;
}

}  // namespace keywatch
