// Reply errors, classified once: every Redis conversation (loop connections, the blocking
// client, the topology probe) asks classify() what kind of error a reply is instead of
// comparing string prefixes at each site. Pure functions: thread-safe.
#pragma once

#include <hiredis/hiredis.h>

#include <string>

namespace keywatch {

enum class ReplyError {
    None,         // not an error reply (or no reply at all: see classify)
    Moved,        // -MOVED slot host:port: the slot is served elsewhere for good
    Ask,          // -ASK slot host:port: this one command, there, after ASKING
    TryAgain,     // -TRYAGAIN: a multi-key command during a slot migration
    ClusterDown,  // -CLUSTERDOWN: the cluster refuses commands (slots uncovered, fail state)
    NoScript,     // -NOSCRIPT: the script cache is empty (restart, failover, SCRIPT FLUSH)
    Loading,      // -LOADING: the server is loading its data set
    Busy,         // -BUSY: a script runs too long; -MASTERDOWN: a replica lost its master
    Auth,         // -NOAUTH / -WRONGPASS: credentials missing or refused
    NoPerm,       // -NOPERM: the ACL user may not run this command or touch this key
    ReadOnly,     // -READONLY: a replica (a failover demoted the node we write to)
    Other,        // any other error
};

// The kind of a reply; a null reply (the connection went away) is None, so callers check
// the reply itself first.
ReplyError classify(const redisReply *r);

// True for the kinds a later retry can fix without anyone changing anything: the server
// is loading, busy, migrating a slot, or the cluster is settling.
bool is_transient(ReplyError e);

// -CLUSTERDOWN for the whole node ("The cluster is down": its cluster is in the fail state,
// every key refused), as opposed to one slot no master serves ("Hash slot not served").
bool whole_cluster_down(const redisReply *r);

// The node a -MOVED or -ASK names, as Endpoint::str() ("[v6]:port" too; empty for any
// other reply).
std::string redirect_target(const redisReply *r);

// The kind's name for messages and tests ("MOVED", "LOADING", ...).
const char *reply_error_name(ReplyError e);

}  // namespace keywatch
