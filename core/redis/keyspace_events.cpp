#include "core/redis/keyspace_events.h"

#include <algorithm>

namespace keywatch {

const std::vector<EventSpec> &event_table() {
    // From the notifyKeyspaceEvent() calls of Redis 7.0 (notify.c, db.c, expire.c, evict.c,
    // t_string.c, bitops.c, hyperloglog.c, t_list.c, sort.c, t_set.c, t_hash.c, t_zset.c,
    // geo.c, t_stream.c, cluster.c), plus 7.4's hash-field expiry. The first eight are "*".
    static const std::vector<EventSpec> table = {
        {"expired", 'x', "a key with a TTL was deleted on expiry", "", true, AdoptUse::Claim},
        {"evicted", 'e', "a key was evicted under maxmemory", "", true, AdoptUse::Claim},
        {"del", 'g', "DEL/UNLINK/GETDEL, EXPIRE with a past time, a collection emptied", "", true,
         AdoptUse::Forget},
        {"set", '$', "SET/SETNX/SETEX/PSETEX/MSET(NX)/GETSET, BITOP's destination", "", true,
         AdoptUse::Adopt},
        {"expire", 'g', "EXPIRE family, SET/GETEX with a TTL, SETEX/PSETEX", "", true,
         AdoptUse::Adopt},
        {"persist", 'g', "PERSIST, GETEX PERSIST", "", true, AdoptUse::Adopt},
        {"rename_from", 'g', "RENAME(NX): the source key", "", true, AdoptUse::Forget},
        {"rename_to", 'g', "RENAME(NX): the destination key", "", true, AdoptUse::Adopt},
        {"new", 'n', "a key was created", "", false},
        {"move_from", 'g', "MOVE: the key in the source db", "", false, AdoptUse::Forget},
        {"move_to", 'g', "MOVE: the key in the destination db", "", false, AdoptUse::Adopt},
        {"copy_to", 'g', "COPY: the destination key", "", false, AdoptUse::Adopt},
        {"restore", 'g', "RESTORE, MIGRATE's target", "", false, AdoptUse::Adopt},
        {"setrange", '$', "SETRANGE", "", false, AdoptUse::Snapshot},
        {"incrby", '$', "INCR/DECR/INCRBY/DECRBY", "", false, AdoptUse::Snapshot},
        {"incrbyfloat", '$', "INCRBYFLOAT", "", false, AdoptUse::Snapshot},
        {"append", '$', "APPEND", "", false, AdoptUse::Snapshot},
        {"setbit", '$', "SETBIT, BITFIELD", "", false, AdoptUse::Snapshot},
        {"pfadd", '$', "PFADD, PFMERGE's destination", "", false},
        {"lpush", 'l', "LPUSH(X), LMOVE/RPOPLPUSH's destination", "", false},
        {"rpush", 'l', "RPUSH(X), LMOVE/RPOPLPUSH's destination", "", false},
        {"lpop", 'l', "(B)LPOP, (B)LMPOP, LMOVE's source", "", false},
        {"rpop", 'l', "(B)RPOP, (B)LMPOP, LMOVE/RPOPLPUSH's source", "", false},
        {"linsert", 'l', "LINSERT", "", false},
        {"lset", 'l', "LSET", "", false},
        {"lrem", 'l', "LREM", "", false},
        {"ltrim", 'l', "LTRIM", "", false},
        {"sortstore", 'l', "SORT ... STORE: the destination key", "", false},
        {"sadd", 's', "SADD, SMOVE's destination", "", false},
        {"srem", 's', "SREM, SMOVE's source", "", false},
        {"spop", 's', "SPOP", "", false},
        {"sinterstore", 's', "SINTERSTORE", "", false},
        {"sunionstore", 's', "SUNIONSTORE", "", false},
        {"sdiffstore", 's', "SDIFFSTORE", "", false},
        {"hset", 'h', "HSET/HSETNX/HMSET", "", false},
        {"hdel", 'h', "HDEL", "", false},
        {"hincrby", 'h', "HINCRBY", "", false},
        {"hincrbyfloat", 'h', "HINCRBYFLOAT", "", false},
        {"hexpire", 'h', "HEXPIRE/HPEXPIRE/HEXPIREAT/HPEXPIREAT", "7.4", false},
        {"hexpired", 'h', "a hash field expired", "7.4", false},
        {"hpersist", 'h', "HPERSIST", "7.4", false},
        {"zadd", 'z', "ZADD, GEOADD", "", false},
        {"zincr", 'z', "ZINCRBY, ZADD INCR", "", false},
        {"zrem", 'z', "ZREM", "", false},
        {"zremrangebyscore", 'z', "ZREMRANGEBYSCORE", "", false},
        {"zremrangebyrank", 'z', "ZREMRANGEBYRANK", "", false},
        {"zremrangebylex", 'z', "ZREMRANGEBYLEX", "", false},
        {"zunionstore", 'z', "ZUNIONSTORE", "", false},
        {"zinterstore", 'z', "ZINTERSTORE", "", false},
        {"zdiffstore", 'z', "ZDIFFSTORE", "", false},
        {"zrangestore", 'z', "ZRANGESTORE", "", false},
        {"zpopmin", 'z', "(B)ZPOPMIN, (B)ZMPOP MIN", "", false},
        {"zpopmax", 'z', "(B)ZPOPMAX, (B)ZMPOP MAX", "", false},
        {"georadiusstore", 'z', "GEORADIUS(BYMEMBER) ... STORE", "", false},
        {"geosearchstore", 'z', "GEOSEARCHSTORE", "", false},
        {"xadd", 't', "XADD", "", false},
        {"xtrim", 't', "XTRIM, XADD's trimming", "", false},
        {"xdel", 't', "XDEL", "", false},
        {"xsetid", 't', "XSETID", "", false},
        {"xgroup-create", 't', "XGROUP CREATE", "", false},
        {"xgroup-setid", 't', "XGROUP SETID", "", false},
        {"xgroup-destroy", 't', "XGROUP DESTROY", "", false},
        {"xgroup-createconsumer", 't', "XGROUP CREATECONSUMER, a consumer XREADGROUP made", "",
         false},
        {"xgroup-delconsumer", 't', "XGROUP DELCONSUMER", "", false},
        {"keymiss", 'm', "a read of a missing key", "", false},
    };
    return table;
}

const EventSpec *find_event(std::string_view name) {
    for (const EventSpec &e : event_table())
        if (e.name == name) return &e;
    return nullptr;
}

const std::vector<std::string> &event_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        for (const EventSpec &e : event_table()) out.emplace_back(e.name);
        return out;
    }();
    return names;
}

std::vector<std::string> star_events() {
    std::vector<std::string> out;
    for (const EventSpec &e : event_table())
        if (e.in_star) out.emplace_back(e.name);
    return out;
}

std::vector<std::string> adopt_events(bool snapshot) {
    std::vector<std::string> out;
    for (const EventSpec &e : event_table())
        if (e.adopt == AdoptUse::Adopt || e.adopt == AdoptUse::Forget ||
            e.adopt == AdoptUse::Claim || (snapshot && e.adopt == AdoptUse::Snapshot))
            out.emplace_back(e.name);
    return out;
}

std::string notify_flags_for(const std::vector<std::string> &events,
                             std::vector<std::string> *unknown) {
    std::string flags = "E";
    for (const EventSpec &e : event_table())
        if (std::find(events.begin(), events.end(), e.name) != events.end() &&
            flags.find(e.flag) == std::string::npos)
            flags += e.flag;
    if (unknown)
        for (const std::string &name : events)
            if (!find_event(name)) unknown->push_back(name);
    return flags;
}

std::string missing_notify_flags(const std::string &have, const std::string &need) {
    std::string expanded = have;
    if (have.find('A') != std::string::npos) expanded += "g$lshzxetd";
    std::string missing;
    for (char c : need)
        if (expanded.find(c) == std::string::npos && missing.find(c) == std::string::npos)
            missing += c;
    return missing;
}

bool notify_flags_from_reply(const redisReply *r, std::string *flags) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[1]->type != REDIS_REPLY_STRING)
        return false;
    flags->assign(r->element[1]->str, r->element[1]->len);
    return true;
}

}  // namespace keywatch
