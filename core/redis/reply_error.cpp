#include "core/redis/reply_error.h"

#include <cstring>
#include <string_view>

#include "core/redis/endpoint.h"

namespace keywatch {
namespace {

struct Prefix {
    const char *text;
    ReplyError kind;
};

// The first word of each error reply keywatch acts on.
constexpr Prefix kPrefixes[] = {
    {"MOVED", ReplyError::Moved},       {"ASK", ReplyError::Ask},
    {"TRYAGAIN", ReplyError::TryAgain}, {"CLUSTERDOWN", ReplyError::ClusterDown},
    {"NOSCRIPT", ReplyError::NoScript}, {"LOADING", ReplyError::Loading},
    {"BUSY", ReplyError::Busy},         {"MASTERDOWN", ReplyError::Busy},
    {"NOAUTH", ReplyError::Auth},       {"WRONGPASS", ReplyError::Auth},
    {"NOPERM", ReplyError::NoPerm},     {"READONLY", ReplyError::ReadOnly},
};

}  // namespace

ReplyError classify(const redisReply *r) {
    if (!r || r->type != REDIS_REPLY_ERROR) return ReplyError::None;
    // The first word, whole: "ASKING" is not "ASK", "BUSYKEY" is not "BUSY".
    size_t word = 0;
    while (word < r->len && r->str[word] != ' ') word++;
    for (const Prefix &p : kPrefixes)
        if (strlen(p.text) == word && memcmp(r->str, p.text, word) == 0) return p.kind;
    return ReplyError::Other;
}

bool is_transient(ReplyError e) {
    return e == ReplyError::TryAgain || e == ReplyError::ClusterDown || e == ReplyError::Loading ||
           e == ReplyError::Busy;
}

bool whole_cluster_down(const redisReply *r) {
    static constexpr char kDown[] = "CLUSTERDOWN The cluster is down";
    return classify(r) == ReplyError::ClusterDown && r->len >= sizeof kDown - 1 &&
           memcmp(r->str, kDown, sizeof kDown - 1) == 0;
}

std::string redirect_target(const redisReply *r) {
    ReplyError e = classify(r);
    if (e != ReplyError::Moved && e != ReplyError::Ask) return "";
    std::string text(r->str, r->len);
    size_t sp = text.rfind(' ');
    if (sp == std::string::npos) return "";
    // Redis prints an IPv6 node unbracketed ("MOVED 3999 ::1:7001"): named as keywatch
    // names it everywhere else.
    const auto node = Endpoint::parse(std::string_view(text).substr(sp + 1), Endpoint::Form::Redis);
    return node ? node->str() : "";
}

const char *reply_error_name(ReplyError e) {
    switch (e) {
        case ReplyError::None:
            return "none";
        case ReplyError::Moved:
            return "MOVED";
        case ReplyError::Ask:
            return "ASK";
        case ReplyError::TryAgain:
            return "TRYAGAIN";
        case ReplyError::ClusterDown:
            return "CLUSTERDOWN";
        case ReplyError::NoScript:
            return "NOSCRIPT";
        case ReplyError::Loading:
            return "LOADING";
        case ReplyError::Busy:
            return "BUSY";
        case ReplyError::Auth:
            return "AUTH";
        case ReplyError::NoPerm:
            return "NOPERM";
        case ReplyError::ReadOnly:
            return "READONLY";
        case ReplyError::Other:
            return "error";
    }
    return "error";
}

}  // namespace keywatch
