#include "core/scripts.h"

#include <cstdint>
#include <cstring>

namespace keywatch {
namespace scripts {

// Shared prelude: Redis's clock in ms, and the meta record of a claimed item.
#define KW_LUA_PRELUDE                                                        \
    "local t = redis.call('TIME')\n"                                          \
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n" \
    "local function meta(id)\n"                                               \
    "  local m = redis.call('HGET', KEYS[3], 'm:' .. id)\n"                   \
    "  if not m then return 0, nil, nil end\n"                                \
    "  local a, d, o = string.match(m, '^(%d+):(%d+):(.*)$')\n"               \
    "  return tonumber(a), tonumber(d), o\n"                                  \
    "end\n"

// Claim one item for `owner`: in flight until now + lease, attempt counted, deadline
// kept from the first claim so the event id stays stable across redeliveries.
#define KW_LUA_TAKE                                                                              \
    "local function take(id, deadline, source, out)\n"                                           \
    "  local a, d = meta(id)\n"                                                                  \
    "  a = a + 1\n"                                                                              \
    "  if d then deadline = d end\n"                                                             \
    "  redis.call('ZADD', KEYS[2], now + lease, id)\n"                                           \
    "  redis.call('HSET', KEYS[3], 'm:' .. id, string.format('%d:%d:%s', a, deadline, owner))\n" \
    "  local p = redis.call('HGET', KEYS[3], 'p:' .. id)\n"                                      \
    "  out[#out + 1] = {id, deadline, a, p, source}\n"                                           \
    "end\n"

const Script kTrack = {"track", R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
local r
if ARGV[3] == 'NX' then r = redis.call('SET', KEYS[6], ARGV[1], 'PX', ttl, 'NX')
elseif ARGV[3] == 'XX' then r = redis.call('SET', KEYS[6], ARGV[1], 'PX', ttl, 'XX')
else r = redis.call('SET', KEYS[6], ARGV[1], 'PX', ttl) end
if not r then return -1 end
redis.call('ZADD', KEYS[1], now + ttl, KEYS[6])
if ARGV[4] == '1' then redis.call('HSET', KEYS[3], 'p:' .. KEYS[6], ARGV[1])
else redis.call('HDEL', KEYS[3], 'p:' .. KEYS[6]) end
return now + ttl
)lua"};

const Script kUntrack = {"untrack", R"lua(
local n = 0
if ARGV[1] == '1' then n = redis.call('DEL', KEYS[6]) end
local z = redis.call('ZREM', KEYS[1], KEYS[6])
redis.call('HDEL', KEYS[3], 'p:' .. KEYS[6])
return {n, z}
)lua"};

const Script kAdopt = {"adopt", R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local pttl = redis.call('PTTL', KEYS[6])
if pttl < 0 then return pttl end
if ARGV[1] == '1' then
  if redis.call('TYPE', KEYS[6]).ok ~= 'string' then return -3 end
  redis.call('HSET', KEYS[3], 'p:' .. KEYS[6], redis.call('GET', KEYS[6]))
else
  redis.call('HDEL', KEYS[3], 'p:' .. KEYS[6])
end
redis.call('ZADD', KEYS[1], now + pttl, KEYS[6])
return now + pttl
)lua"};

const Script kSchedule = {"schedule", R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id = ARGV[1]
local at = tonumber(ARGV[3])
if at <= 0 then at = now + tonumber(ARGV[4]) end
if at < now then at = now end
if ARGV[5] == 'NX' and (redis.call('ZSCORE', KEYS[1], id) or redis.call('ZSCORE', KEYS[2], id)) then
  return -1
end
redis.call('ZADD', KEYS[1], at, id)
redis.call('HSET', KEYS[3], 'p:' .. id, ARGV[2])
return at
)lua"};

const Script kReschedule = {"reschedule", R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id = ARGV[1]
if not redis.call('ZSCORE', KEYS[1], id) then
  if redis.call('ZSCORE', KEYS[2], id) then return -2 end
  return -1
end
local at = tonumber(ARGV[2])
if at <= 0 then at = now + tonumber(ARGV[3]) end
if at < now then at = now end
redis.call('ZADD', KEYS[1], at, id)
return at
)lua"};

const Script kCancel = {"cancel", R"lua(
local id = ARGV[1]
if redis.call('ZREM', KEYS[1], id) == 1 then
  redis.call('HDEL', KEYS[3], 'p:' .. id, 'm:' .. id, 'e:' .. id)
  return 1
end
if redis.call('ZSCORE', KEYS[2], id) then return -2 end
return 0
)lua"};

const Script kClaimDue = {"claim_due", KW_LUA_PRELUDE
                          "local lease = tonumber(ARGV[2])\n"
                          "local owner = ARGV[3]\n" KW_LUA_TAKE R"lua(
local limit = tonumber(ARGV[1])
local is_keys = ARGV[4] == '1'
local out = {}
local untracked, moved = 0, 0
-- Leases that ran out first: their holders crashed or hung.
local stale = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
for i = 1, #stale, 2 do take(stale[i], tonumber(stale[i + 1]), 'L', out) end
local room = limit - #out
if room > 0 then
  local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, room)
  for i = 1, #due, 2 do
    local id, score = due[i], tonumber(due[i + 1])
    local fire = true
    if is_keys then
      -- The key decides: a later TTL reschedules, no TTL untracks, only a key that is
      -- really gone fires. PTTL on an overdue key makes Redis delete it now.
      local pttl = redis.call('PTTL', id)
      if pttl == -1 then
        redis.call('ZREM', KEYS[1], id)
        redis.call('HDEL', KEYS[3], 'p:' .. id, 'm:' .. id, 'e:' .. id)
        untracked = untracked + 1
        fire = false
      elseif pttl >= 0 then
        -- Redis expires a key only when now > its deadline, and SET inside the track
        -- script may have stamped it a millisecond after our score: within 2 ms it is the
        -- same TTL, just not gone yet, and stays due (with its deadline) for the next sweep.
        if now + pttl > score + 2 then
          redis.call('ZADD', KEYS[1], now + pttl, id)
          moved = moved + 1
        end
        fire = false
      end
    end
    if fire then
      redis.call('ZREM', KEYS[1], id)
      take(id, score, 'S', out)
    end
  end
end
local nxt = -1
local d = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if d[2] then nxt = tonumber(d[2]) end
local f = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if f[2] and (nxt < 0 or tonumber(f[2]) < nxt) then nxt = tonumber(f[2]) end
if is_keys then redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now - tonumber(ARGV[5])) end
return {now, nxt, untracked, moved, out}
)lua"};

const Script kClaimLive = {"claim_live", KW_LUA_PRELUDE
                           "local lease = tonumber(ARGV[1])\n"
                           "local owner = ARGV[2]\n" KW_LUA_TAKE R"lua(
-- One answer per id: a claimed item, or 'T' taken by someone, 'D' done recently,
-- 'R' not expired after all (TTL moved), 'U' not tracked.
local res = {}
for i = 3, #ARGV do
  local id = ARGV[i]
  local score = redis.call('ZSCORE', KEYS[1], id)
  if score then
    local pttl = redis.call('PTTL', id)
    if pttl == -1 then
      redis.call('ZREM', KEYS[1], id)
      redis.call('HDEL', KEYS[3], 'p:' .. id, 'm:' .. id, 'e:' .. id)
      res[#res + 1] = 'U'
    elseif pttl >= 0 then
      if now + pttl > tonumber(score) + 2 then redis.call('ZADD', KEYS[1], now + pttl, id) end
      res[#res + 1] = 'R'
    else
      redis.call('ZREM', KEYS[1], id)
      local out = {}
      take(id, tonumber(score), 'N', out)
      res[#res + 1] = out[1]
    end
  elseif redis.call('ZSCORE', KEYS[2], id) then
    res[#res + 1] = 'T'
  elseif redis.call('ZSCORE', KEYS[5], id) then
    res[#res + 1] = 'D'
  else
    res[#res + 1] = 'U'
  end
end
return {now, res}
)lua"};

const Script kForget = {"forget", R"lua(
local n = 0
for i = 1, #ARGV do
  local id = ARGV[i]
  if redis.call('ZSCORE', KEYS[1], id) and redis.call('EXISTS', id) == 0 then
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', KEYS[3], 'p:' .. id, 'm:' .. id, 'e:' .. id)
    n = n + 1
  end
end
return n
)lua"};

const Script kAck = {"ack", KW_LUA_PRELUDE R"lua(
local owner = ARGV[1]
local is_keys = ARGV[2] == '1'
local n = 0
for i = 3, #ARGV do
  local id = ARGV[i]
  local _, _, o = meta(id)
  if o == owner and redis.call('ZSCORE', KEYS[2], id) then
    redis.call('ZREM', KEYS[2], id)
    redis.call('HDEL', KEYS[3], 'm:' .. id, 'e:' .. id)
    if not redis.call('ZSCORE', KEYS[1], id) then redis.call('HDEL', KEYS[3], 'p:' .. id) end
    if is_keys then redis.call('ZADD', KEYS[5], now, id) end
    n = n + 1
  end
end
return n
)lua"};

const Script kFail = {"fail", KW_LUA_PRELUDE R"lua(
local owner, is_keys, id, err = ARGV[1], ARGV[2] == '1', ARGV[3], ARGV[4]
local reject, max_attempts = ARGV[5] == '1', tonumber(ARGV[6])
local base, cap, jitter = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local a, d, o = meta(id)
if o ~= owner or not redis.call('ZSCORE', KEYS[2], id) then return 0 end
if reject or a >= max_attempts then
  -- Dead letter first, then out of flight: one script, so never one without the other.
  local p = redis.call('HGET', KEYS[3], 'p:' .. id)
  local fields = {'id', id, 'attempts', a, 'deadline', d, 'error', err, 'failed_ms', now}
  if p then fields[#fields + 1] = 'payload'; fields[#fields + 1] = p end
  redis.call('XADD', KEYS[4], '*', unpack(fields))
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], 'm:' .. id, 'e:' .. id)
  if not redis.call('ZSCORE', KEYS[1], id) then redis.call('HDEL', KEYS[3], 'p:' .. id) end
  if is_keys then redis.call('ZADD', KEYS[5], now, id) end
  return 2
end
local delay = base
for _ = 2, a do
  delay = delay * 2
  if delay >= cap then break end
end
if delay > cap then delay = cap end
delay = math.floor(delay / 2 + delay / 2 * jitter)
redis.call('ZREM', KEYS[2], id)
redis.call('ZADD', KEYS[1], now + delay, id)
redis.call('HSET', KEYS[3], 'e:' .. id, err)
return 1
)lua"};

const Script kRenew = {"renew", KW_LUA_PRELUDE R"lua(
local owner, lease = ARGV[1], tonumber(ARGV[2])
local n = 0
for i = 3, #ARGV do
  local id = ARGV[i]
  local _, _, o = meta(id)
  if o == owner and redis.call('ZSCORE', KEYS[2], id) then
    redis.call('ZADD', KEYS[2], now + lease, id)
    n = n + 1
  end
end
return n
)lua"};

const Script kRelease = {"release", KW_LUA_PRELUDE R"lua(
-- Items this owner claimed but will not handle (it is stopping): back to due at their
-- deadline, as if never claimed (the attempt is given back).
local owner = ARGV[1]
local n = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  local a, d, o = meta(id)
  if o == owner and redis.call('ZSCORE', KEYS[2], id) then
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZADD', KEYS[1], d, id)
    if a <= 1 then
      redis.call('HDEL', KEYS[3], 'm:' .. id)
    else
      redis.call('HSET', KEYS[3], 'm:' .. id, string.format('%d:%d:', a - 1, d))
    end
    n = n + 1
  end
end
return n
)lua"};

const Script kReplay = {"replay", R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local entries
if ARGV[1] ~= '' then
  entries = redis.call('XRANGE', KEYS[4], ARGV[1], ARGV[1])
  if #entries == 0 then return -1 end
else
  entries = redis.call('XRANGE', KEYS[4], '-', '+', 'COUNT', tonumber(ARGV[2]))
end
local n = 0
for _, e in ipairs(entries) do
  local f = {}
  for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
  if f.id then
    redis.call('ZADD', KEYS[1], now, f.id)
    if f.payload then redis.call('HSET', KEYS[3], 'p:' .. f.id, f.payload) end
    redis.call('HDEL', KEYS[3], 'm:' .. f.id, 'e:' .. f.id)
    redis.call('ZREM', KEYS[5], f.id)
    n = n + 1
  end
  redis.call('XDEL', KEYS[4], e[1])
end
return n
)lua"};

const Script kPurge = {"purge", R"lua(
if ARGV[1] ~= '' then return redis.call('XDEL', KEYS[4], ARGV[1]) end
local n = redis.call('XLEN', KEYS[4])
redis.call('DEL', KEYS[4])
return n
)lua"};

const Script kInspect = {"inspect", R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local oldest = -1
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if first[2] and tonumber(first[2]) <= now then oldest = now - tonumber(first[2]) end
local dead = 0
if redis.call('EXISTS', KEYS[4]) == 1 then dead = redis.call('XLEN', KEYS[4]) end
return {now, redis.call('ZCARD', KEYS[1]), redis.call('ZCOUNT', KEYS[1], '-inf', now),
        redis.call('ZCARD', KEYS[2]), dead, oldest}
)lua"};

const Script *const kAll[] = {&kTrack,    &kUntrack,   &kAdopt,  &kSchedule, &kReschedule, &kCancel,
                              &kClaimDue, &kClaimLive, &kForget, &kAck,      &kFail,       &kRenew,
                              &kRelease,  &kReplay,    &kPurge,  &kInspect};
const size_t kAllCount = sizeof kAll / sizeof kAll[0];

}  // namespace scripts

// SHA-1 (FIPS 180-4), only to name scripts for EVALSHA without a SCRIPT LOAD round trip.
std::string script_sha1(const char *body) {
    auto rol = [](uint32_t x, int n) { return (x << n) | (x >> (32 - n)); };
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    std::string msg(body);
    uint64_t bits = static_cast<uint64_t>(msg.size()) * 8;
    msg.push_back(static_cast<char>(0x80));
    while (msg.size() % 64 != 56) msg.push_back('\0');
    for (int i = 7; i >= 0; i--) msg.push_back(static_cast<char>((bits >> (i * 8)) & 0xff));
    for (size_t off = 0; off < msg.size(); off += 64) {
        uint32_t w[80];
        for (int i = 0; i < 16; i++) {
            const auto *p = reinterpret_cast<const unsigned char *>(msg.data() + off + i * 4);
            w[i] = (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
        }
        for (int i = 16; i < 80; i++) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
        for (int i = 0; i < 80; i++) {
            uint32_t f, k;
            if (i < 20) {
                f = (b & c) | (~b & d);
                k = 0x5A827999;
            } else if (i < 40) {
                f = b ^ c ^ d;
                k = 0x6ED9EBA1;
            } else if (i < 60) {
                f = (b & c) | (b & d) | (c & d);
                k = 0x8F1BBCDC;
            } else {
                f = b ^ c ^ d;
                k = 0xCA62C1D6;
            }
            uint32_t tmp = rol(a, 5) + f + e + k + w[i];
            e = d;
            d = c;
            c = rol(b, 30);
            b = a;
            a = tmp;
        }
        h[0] += a;
        h[1] += b;
        h[2] += c;
        h[3] += d;
        h[4] += e;
    }
    static const char hex[] = "0123456789abcdef";
    std::string out;
    for (uint32_t v : h)
        for (int i = 28; i >= 0; i -= 4) out.push_back(hex[(v >> i) & 15]);
    return out;
}

}  // namespace keywatch
