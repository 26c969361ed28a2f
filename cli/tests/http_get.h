// A blocking HTTP/1.0 request over a plain socket, for the daemon's tests and its bench:
// the status, the headers (names lower-cased) and the body, or status 0 with the reason in
// the body when the server could not be reached. Thread-safe (no shared state).
#pragma once

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <map>
#include <string>

#include "core/redis/endpoint.h"

namespace kwtest {

struct HttpReply {
    int status = 0;
    std::map<std::string, std::string> headers;
    std::string body;
};

// address: "host:port" (as HttpServer::address gives it, "[::1]:port" too).
inline HttpReply http_request(const std::string &address, const std::string &method,
                              const std::string &path, const std::string &extra_headers = "") {
    HttpReply r;
    const auto where = keywatch::Endpoint::parse(address, keywatch::Endpoint::Form::Strict);
    addrinfo hints{}, *res = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    if (!where ||
        getaddrinfo(where->host.c_str(), std::to_string(where->port).c_str(), &hints, &res) != 0) {
        r.body = "cannot resolve " + address;
        return r;
    }
    int fd = socket(res->ai_family, SOCK_STREAM, 0);
    bool connected = fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0;
    freeaddrinfo(res);
    if (!connected) {
        r.body = "cannot connect to " + address + ": " + std::strerror(errno);
        if (fd >= 0) close(fd);
        return r;
    }
    std::string req =
        method + " " + path + " HTTP/1.0\r\nHost: " + address + "\r\n" + extra_headers + "\r\n";
    for (size_t off = 0; off < req.size();) {
        ssize_t n = send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
    }
    std::string raw;
    char buf[65536];
    for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;)
        raw.append(buf, static_cast<size_t>(n));
    close(fd);
    size_t head_end = raw.find("\r\n\r\n");
    if (raw.compare(0, 5, "HTTP/") != 0 || head_end == std::string::npos) {
        r.body = "not an HTTP reply: " + raw.substr(0, 200);
        return r;
    }
    r.status = std::atoi(raw.c_str() + raw.find(' ') + 1);
    size_t line = raw.find("\r\n") + 2;
    while (line < head_end) {
        size_t eol = raw.find("\r\n", line);
        std::string h = raw.substr(line, eol - line);
        size_t sep = h.find(':');
        std::string name = h.substr(0, sep);
        for (auto &c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        size_t v = h.find_first_not_of(' ', sep + 1);
        r.headers[name] = v == std::string::npos ? "" : h.substr(v);
        line = eol + 2;
    }
    r.body = raw.substr(head_end + 4);
    return r;
}

inline HttpReply http_get(const std::string &address, const std::string &path,
                          const std::string &extra_headers = "") {
    return http_request(address, "GET", path, extra_headers);
}

}  // namespace kwtest
