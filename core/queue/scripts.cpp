#include "core/queue/scripts.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string_view>

#include "core/base/time_limit.h"

namespace keywatch {
namespace scripts {

// The latest deadline keywatch accepts (core/base/time_limit.h); scripts that write a deadline
// return kPastMax for a later one, before writing anything.
#define KW_LUA_MAX "local MAX_MS = " KW_MAX_TIME_MS_TEXT "\n"

// Shared prelude: Redis's clock, the meta record of a claimed item, stamped snapshots.
// Trap: Lua 5.1 turns a number into text (`..`, tostring) with "%.14g", so a deadline of
// 1e14 ms (year 5138) or later, which keywatch accepts, would lose digits: numbers that go
// into a record are written with string.format('%d'), or handed to redis.call as numbers
// (Redis formats those exactly).
#define KW_LUA_PRELUDE                                                                        \
    KW_LUA_MAX                                                                                \
    "local t = redis.call('TIME')\n"                                                          \
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"                 \
    "local SENTINEL = string.rep('k', 72)\n"                                                  \
    "local function parse_meta(m)\n"                                                          \
    "  if not m then return 0, nil, nil end\n"                                                \
    "  local a, d, o = string.match(m, '^(%d+):(%d+):(.*)$')\n"                               \
    "  return tonumber(a), tonumber(d), o\n"                                                  \
    "end\n"                                                                                   \
    "local function unstamp(p, d)\n"                                                          \
    "  if not p then return false end\n"                                                      \
    "  local bar = string.find(p, '|', 1, true)\n"                                            \
    "  if not bar or tonumber(string.sub(p, 1, bar - 1)) ~= d then return false end\n"        \
    "  return string.sub(p, bar + 1)\n"                                                       \
    "end\n"                                                                                   \
    "local function prefixed(prefix, ids)\n"                                                  \
    "  local out = {}\n"                                                                      \
    "  for i, id in ipairs(ids) do out[i] = prefix .. id end\n"                               \
    "  return out\n"                                                                          \
    "end\n"                                                                                   \
    "local function ids_from(first)\n"                                                        \
    "  local ids = {}\n"                                                                      \
    "  for i = first, #ARGV do ids[#ids + 1] = ARGV[i] end\n"                                 \
    "  return ids\n"                                                                          \
    "end\n"                                                                                   \
    "-- The ids `owner` holds, with their metas and meta field names: its name is in their\n" \
    "-- meta record, which only a claim writes (fail and release clear the name when an\n"    \
    "-- item goes back to due, ack deletes the record).\n"                                    \
    "local function held_by(owner, ids)\n"                                                    \
    "  local mf = prefixed('m:', ids)\n"                                                      \
    "  local metas = redis.call('HMGET', KEYS[3], unpack(mf))\n"                              \
    "  local suffix = ':' .. owner\n"                                                         \
    "  local from = -#suffix\n"                                                               \
    "  local mine, mine_metas, mine_fields = {}, {}, {}\n"                                    \
    "  for i, id in ipairs(ids) do\n"                                                         \
    "    local m = metas[i]\n"                                                                \
    "    if m and string.find(m, suffix, from, true) then\n"                                  \
    "      local j = #mine + 1\n"                                                             \
    "      mine[j], mine_metas[j], mine_fields[j] = id, m, mf[i]\n"                           \
    "    end\n"                                                                               \
    "  end\n"                                                                                 \
    "  return mine, mine_metas, mine_fields\n"                                                \
    "end\n"

// Claim ids (due at scores) for `owner` until now + lease: attempts counted, the deadline
// kept from the first claim so the event id stays stable across redeliveries.
// Claim ids (due at scores, Redis's score strings) for `owner` until now + lease: attempts
// counted, the deadline kept from the first claim so the event id stays stable across
// redeliveries. Appends id, deadline, attempt, payload|false, source, last error|false to
// `out`, flat (a table per item costs more than the rest of the claim). Only an item
// claimed before (attempt > 1) can have a last error: those alone are looked up.
#define KW_LUA_TAKE                                                                          \
    "local function take_all(ids, scores, source, is_keys, out)\n"                           \
    "  if #ids == 0 then return end\n"                                                       \
    "  local n = #ids\n"                                                                     \
    "  local f = {}\n"                                                                       \
    "  for i, id in ipairs(ids) do f[i] = 'm:' .. id; f[n + i] = 'p:' .. id end\n"           \
    "  local got = redis.call('HMGET', KEYS[3], unpack(f))\n"                                \
    "  local z, h = {}, {}\n"                                                                \
    "  local lease_end = tostring(now + lease)\n"                                            \
    "  local tail = ':' .. owner\n"                                                          \
    "  local k = #out\n"                                                                     \
    "  local ef, ei = {}, {}\n"                                                              \
    "  for i, id in ipairs(ids) do\n"                                                        \
    "    local a, d = parse_meta(got[i])\n"                                                  \
    "    local meta\n"                                                                       \
    "    if d then\n"                                                                        \
    "      a = a + 1\n"                                                                      \
    "      meta = string.format('%d:%d', a, d) .. tail\n"                                    \
    "    else\n"                                                                             \
    "      a = 1\n"                                                                          \
    "      d = tonumber(scores[i])\n"                                                        \
    "      meta = '1:' .. scores[i] .. tail\n"                                               \
    "    end\n"                                                                              \
    "    z[2 * i - 1] = lease_end\n"                                                         \
    "    z[2 * i] = id\n"                                                                    \
    "    h[2 * i - 1] = f[i]\n"                                                              \
    "    h[2 * i] = meta\n"                                                                  \
    "    local p = got[n + i]\n"                                                             \
    "    if is_keys and p then p = unstamp(p, d) end\n"                                      \
    "    out[k + 1], out[k + 2], out[k + 3], out[k + 4], out[k + 5] = id, d, a, p, source\n" \
    "    out[k + 6] = false\n"                                                               \
    "    if a > 1 then ef[#ef + 1], ei[#ei + 1] = 'e:' .. id, k + 6 end\n"                   \
    "    k = k + 6\n"                                                                        \
    "  end\n"                                                                                \
    "  if #ef > 0 then\n"                                                                    \
    "    local errs = redis.call('HMGET', KEYS[3], unpack(ef))\n"                            \
    "    for j = 1, #ef do out[ei[j]] = errs[j] end\n"                                       \
    "  end\n"                                                                                \
    "  redis.call('ZADD', KEYS[2], unpack(z))\n"                                             \
    "  h[2 * n + 1], h[2 * n + 2] = '~', SENTINEL\n"                                         \
    "  redis.call('HSET', KEYS[3], unpack(h))\n"                                             \
    "end\n"                                                                                  \
    "local function reschedule(id, old, exp)\n"                                              \
    "  redis.call('ZADD', KEYS[1], exp, id)\n"                                               \
    "  local v = unstamp(redis.call('HGET', KEYS[3], 'p:' .. id), old)\n"                    \
    "  if v then\n"                                                                          \
    "    redis.call('HSET', KEYS[3], 'p:' .. id, string.format('%d|', exp) .. v)\n"          \
    "  end\n"                                                                                \
    "end\n"                                                                                  \
    "local function untrack(id)\n"                                                           \
    "  redis.call('ZREM', KEYS[1], id)\n"                                                    \
    "  redis.call('HDEL', KEYS[3], 'p:' .. id, 'm:' .. id, 'e:' .. id)\n"                    \
    "end\n"

const Script kTrack = {"track", KW_LUA_MAX R"lua(
-- ARGV[2] is the deadline on this server's clock (the client keeps its offset): the key's
-- PXAT and its score are the same number.
-- A deadline past the latest keywatch accepts is refused (-9), nothing written.
if tonumber(ARGV[2]) > MAX_MS then return -9 end
-- The common call (no NX/XX, no snapshot) passes two arguments: the least Lua per key.
if #ARGV == 2 then
  redis.call('SET', KEYS[3], ARGV[1], 'PXAT', ARGV[2])
  redis.call('ZADD', KEYS[1], ARGV[2], KEYS[3])
  return tonumber(ARGV[2])
end
local r
if ARGV[3] == 'NX' then r = redis.call('SET', KEYS[3], ARGV[1], 'PXAT', ARGV[2], 'NX')
elseif ARGV[3] == 'XX' then r = redis.call('SET', KEYS[3], ARGV[1], 'PXAT', ARGV[2], 'XX')
else r = redis.call('SET', KEYS[3], ARGV[1], 'PXAT', ARGV[2]) end
if not r then return -1 end
redis.call('ZADD', KEYS[1], ARGV[2], KEYS[3])
if ARGV[4] == '1' then
  redis.call('HSETNX', KEYS[2], '~', string.rep('k', 72))
  redis.call('HSET', KEYS[2], 'p:' .. KEYS[3], ARGV[2] .. '|' .. ARGV[1])
end
return tonumber(ARGV[2])
)lua",
                       true};

const Script kUntrack = {"untrack", R"lua(
local n = 0
if ARGV[1] == '1' then n = redis.call('DEL', KEYS[3]) end
local z = redis.call('ZREM', KEYS[1], KEYS[3])
redis.call('HDEL', KEYS[2], 'p:' .. KEYS[3])
return {n, z}
)lua",
                         true};

const Script kAdopt = {"adopt", KW_LUA_MAX R"lua(
local exp = redis.call('PEXPIRETIME', KEYS[3])
if exp < 0 then return exp end
if exp > MAX_MS then return -9 end
if ARGV[1] == '1' then
  if redis.call('TYPE', KEYS[3]).ok ~= 'string' then return -3 end
  redis.call('HSETNX', KEYS[2], '~', string.rep('k', 72))
  redis.call('HSET', KEYS[2], 'p:' .. KEYS[3], string.format('%d|', exp) .. redis.call('GET', KEYS[3]))
end
redis.call('ZADD', KEYS[1], exp, KEYS[3])
return exp
)lua",
                       true};

const Script kSchedule = {"schedule", KW_LUA_PRELUDE R"lua(
local id = ARGV[1]
local at = tonumber(ARGV[3])
if at <= 0 then at = now + tonumber(ARGV[4]) end
if at < now then at = now end
if at > MAX_MS then return -9 end
if ARGV[5] == 'NX' and (redis.call('ZSCORE', KEYS[1], id) or redis.call('ZSCORE', KEYS[2], id)) then
  return -1
end
redis.call('ZADD', KEYS[1], at, id)
redis.call('HSETNX', KEYS[3], '~', SENTINEL)
redis.call('HSET', KEYS[3], 'p:' .. id, ARGV[2])
return at
)lua",
                          false};

const Script kReschedule = {"reschedule", KW_LUA_PRELUDE R"lua(
local id = ARGV[1]
if not redis.call('ZSCORE', KEYS[1], id) then
  if redis.call('ZSCORE', KEYS[2], id) then return -2 end
  return -1
end
local at = tonumber(ARGV[2])
if at <= 0 then at = now + tonumber(ARGV[3]) end
if at < now then at = now end
if at > MAX_MS then return -9 end
redis.call('ZADD', KEYS[1], at, id)
return at
)lua",
                            false};

const Script kCancel = {"cancel", R"lua(
local id = ARGV[1]
if redis.call('ZREM', KEYS[1], id) == 1 then
  redis.call('HDEL', KEYS[3], 'p:' .. id, 'm:' .. id, 'e:' .. id)
  return 1
end
if redis.call('ZSCORE', KEYS[2], id) then return -2 end
return 0
)lua",
                        false};

const Script kClaimDue = {"claim_due",
                          KW_LUA_PRELUDE
                          "local lease = tonumber(ARGV[2])\n"
                          "local owner = ARGV[3]\n" KW_LUA_TAKE R"lua(
local limit = tonumber(ARGV[1])
local is_keys = ARGV[4] == '1'
local out = {}
-- scores[from + 1 .. n]: the scores of those members of due (by rank), as Redis writes them:
-- one ZRANGE and one ZCOUNT per run of equal scores (a burst is one run), or, once runs
-- turn out short, the rest with WITHSCORES. (Redis 7.0 writes each score of a reply with
-- "%.17g": per item, that costs about as much as the rest of its claim.)
local function due_scores(scores, from, n)
  local pos, runs = from, 0
  while pos < n do
    if runs >= 4 and pos - from < runs * 8 then
      local r = redis.call('ZRANGE', KEYS[1], pos, n - 1, 'WITHSCORES')
      for i = 2, #r, 2 do scores[#scores + 1] = r[i] end
      return
    end
    local s = redis.call('ZRANGE', KEYS[1], pos, pos, 'WITHSCORES')[2]
    local c = math.min(redis.call('ZCOUNT', KEYS[1], '-inf', s), n)
    for i = pos + 1, c do scores[i] = s end
    pos, runs = c, runs + 1
  end
end
local untracked, moved = 0, 0
-- The earliest lease end: past now means leases ran out (their holders crashed or hung).
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local next_lease = -1
local relook = false
if first[2] then
  next_lease = tonumber(first[2])
  if next_lease < now then
    local stale = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. now, 'LIMIT', 0, limit)
    local stale_scores = {}
    for i = 1, #stale do stale_scores[i] = now end
    take_all(stale, stale_scores, 'L', is_keys, out)
    relook = true
  end
end
local room = limit - #out / 6
local next_due, relook_due = -1, false
if room > 0 then
  -- The lowest items (at most 32) and one more, with their scores: what is due, and the
  -- next deadline after it.
  local head = math.min(room, 32)
  local due = redis.call('ZRANGE', KEYS[1], 0, head, 'WITHSCORES')
  local ids, scores = {}, {}
  for i = 1, #due, 2 do
    local score = tonumber(due[i + 1])
    if score >= now or i > 2 * head then
      next_due = score
      break
    end
    ids[#ids + 1] = due[i]
    scores[#scores + 1] = due[i + 1]
  end
  if room > head and next_due >= 0 and next_due < now then
    -- More is due: the rest as ids, their deadlines as runs; the next deadline is read
    -- once they left.
    local rest = redis.call('ZRANGE', KEYS[1], '-inf', '(' .. now, 'BYSCORE', 'LIMIT', head,
                            room - head)
    for _, id in ipairs(rest) do ids[#ids + 1] = id end
    due_scores(scores, head, #ids)
    relook_due = true
  end
  local fire, fscores = ids, scores
  -- The key decides: a later expiry reschedules, no TTL untracks, only a key that is
  -- really gone fires. The lookup makes Redis delete an overdue key now. One EXISTS
  -- answers for all when they are all gone, as they usually are.
  if is_keys and #ids > 0 and redis.call('EXISTS', unpack(ids)) > 0 then
    fire, fscores = {}, {}
    for i, id in ipairs(ids) do
      local exp = redis.call('PEXPIRETIME', id)
      if exp == -1 then
        untrack(id)
        untracked = untracked + 1
      elseif exp >= 0 then
        reschedule(id, tonumber(scores[i]), exp)
        moved = moved + 1
        if next_due < 0 or exp < next_due then next_due = exp end
      else
        fire[#fire + 1] = id
        fscores[#fscores + 1] = scores[i]
      end
    end
  end
  if #fire > 0 then
    redis.call('ZREM', KEYS[1], unpack(fire))
    take_all(fire, fscores, 'S', is_keys, out)
    if not relook and (next_lease < 0 or now + lease < next_lease) then next_lease = now + lease end
  end
else
  relook_due = true
end
if relook_due then
  local d = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  next_due = d[2] and tonumber(d[2]) or -1
end
if relook then
  local f = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if f[2] then next_lease = tonumber(f[2]) end
end
if is_keys and ARGV[5] ~= '0' then
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now - tonumber(ARGV[5]))
end
-- How many items are in flight (a caller that holds them all need not watch their
-- leases): only what this call took, if nothing was in flight before.
local inflight = #out / 6
if first[2] then inflight = redis.call('ZCARD', KEYS[2]) end
return {now, next_due, untracked, moved, out, next_lease, inflight}
)lua",
                          false};

const Script kClaimLive = {"claim_live",
                           KW_LUA_PRELUDE
                           "local lease = tonumber(ARGV[1])\n"
                           "local owner = ARGV[2]\n" KW_LUA_TAKE R"lua(
-- One answer per id: 'C' claimed (the claimed items follow, in order, flat as take_all
-- writes them), or 'T' taken by someone, 'D' done recently, 'R' not expired after all
-- (TTL moved, or tracked again), 'U' not tracked.
-- ARGV[3] 'x': the ids come from `expired` events, so their keys are gone: an item past
-- its deadline fires with no key lookup (the usual case). One with a later deadline is
-- looked at (contract point 4): a retry waiting for its backoff keeps its time; a key
-- that is gone had its TTL shortened outside keywatch and fires now, with now as its
-- deadline (its snapshot restamped); a key that exists again was tracked again or written
-- again since it expired: a TTL keeps (or moves) its schedule, no TTL untracks it.
-- 'e' (evictions): each key is looked at.
local expired_events = ARGV[3] == 'x'
local ids = ids_from(4)
local res = {}
if #ids == 0 then return {now, res, {}} end
local scores = redis.call('ZMSCORE', KEYS[1], unpack(ids))
-- Ids not due: held by someone, done recently, or not tracked.
local missing = {}
for i = 1, #ids do
  if not scores[i] then missing[#missing + 1] = ids[i] end
end
local held, done = {}, {}
if #missing > 0 then
  local h = redis.call('ZMSCORE', KEYS[2], unpack(missing))
  local d = redis.call('ZMSCORE', KEYS[5], unpack(missing))
  for j, id in ipairs(missing) do
    held[id] = h[j]
    done[id] = d[j]
  end
end
local fire, fscores, slots = {}, {}, {}
for i, id in ipairs(ids) do
  if scores[i] then
    local score = tonumber(scores[i])
    local exp = -2
    local fscore = scores[i]
    if not expired_events then
      exp = redis.call('PEXPIRETIME', id)
    elseif score >= now then
      -- Not due by its score, yet its key expired. (Two calls, only on this path.)
      local mp = redis.call('HMGET', KEYS[3], 'm:' .. id, 'p:' .. id)
      if mp[1] then
        exp = score  -- a retry waiting for its backoff
      else
        exp = redis.call('PEXPIRETIME', id)
        if exp == -2 then
          -- Its TTL was shortened outside keywatch: due now, whatever its score says.
          fscore = tostring(now)
          local v = unstamp(mp[2], score)
          if v then redis.call('HSET', KEYS[3], 'p:' .. id, fscore .. '|' .. v) end
        end
      end
    end
    if exp == -1 then
      untrack(id)
      res[i] = 'U'
    elseif exp >= 0 then
      if exp ~= score then reschedule(id, score, exp) end
      res[i] = 'R'
    else
      fire[#fire + 1] = id
      fscores[#fscores + 1] = fscore
      slots[#slots + 1] = i
    end
  elseif held[id] then
    res[i] = 'T'
  elseif done[id] then
    res[i] = 'D'
  else
    res[i] = 'U'
  end
end
local out = {}
if #fire > 0 then
  redis.call('ZREM', KEYS[1], unpack(fire))
  take_all(fire, fscores, 'N', true, out)
  for _, i in ipairs(slots) do res[i] = 'C' end
end
return {now, res, out}
)lua",
                           false};

const Script kForget = {"forget", R"lua(
local ids = ARGV
if #ids == 0 then return 0 end
local scores = redis.call('ZMSCORE', KEYS[1], unpack(ids))
local n = 0
for i, id in ipairs(ids) do
  if scores[i] and redis.call('EXISTS', id) == 0 then
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', KEYS[3], 'p:' .. id, 'm:' .. id, 'e:' .. id)
    n = n + 1
  end
end
return n
)lua",
                        false};

const Script kAck = {"ack", KW_LUA_PRELUDE R"lua(
local owner = ARGV[1]
local is_keys = ARGV[2] == '1'
local ids = ids_from(3)
local n = #ids
if n == 0 then return 0 end
-- One HMGET for the metas (who holds each id) and the payloads: due is asked whether an id
-- came back (its payload is then kept) only for ids that have one.
local f = {}
for i, id in ipairs(ids) do f[i], f[n + i] = 'm:' .. id, 'p:' .. id end
local got = redis.call('HMGET', KEYS[3], unpack(f))
local suffix = ':' .. owner
local from = -#suffix
local mine, gone, paid, done = {}, {}, {}, {}
local stamp = tostring(now)
for i, id in ipairs(ids) do
  local m = got[i]
  if m and string.find(m, suffix, from, true) then
    mine[#mine + 1] = id
    gone[#gone + 1] = f[i]
    -- Only a retried item (attempt > 1, so not "1:...") can carry an error.
    if string.byte(m, 1) ~= 49 or string.byte(m, 2) ~= 58 then gone[#gone + 1] = 'e:' .. id end
    if got[n + i] then paid[#paid + 1] = id end
    done[#done + 1] = stamp
    done[#done + 1] = id
  end
end
if #mine == 0 then return 0 end
redis.call('ZREM', KEYS[2], unpack(mine))
if #paid > 0 then
  local again = redis.call('ZMSCORE', KEYS[1], unpack(paid))
  for j, id in ipairs(paid) do
    if not again[j] then gone[#gone + 1] = 'p:' .. id end
  end
end
redis.call('HDEL', KEYS[3], unpack(gone))
if is_keys then redis.call('ZADD', KEYS[5], unpack(done)) end
return #mine
)lua",
                     false};

const Script kFail = {"fail", KW_LUA_PRELUDE R"lua(
local owner, is_keys, id, err = ARGV[1], ARGV[2] == '1', ARGV[3], ARGV[4]
local reject, max_attempts = ARGV[5] == '1', tonumber(ARGV[6])
local base, cap, jitter = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local a, d, o = parse_meta(redis.call('HGET', KEYS[3], 'm:' .. id))
if o ~= owner or not redis.call('ZSCORE', KEYS[2], id) then return 0 end
if reject or a >= max_attempts then
  -- Dead letter first, then out of flight: one script, so never one without the other.
  local p = redis.call('HGET', KEYS[3], 'p:' .. id)
  if is_keys then p = unstamp(p, d) end
  local fields = {'id', id, 'attempts', a, 'deadline', d, 'error', err, 'failed_ms', now}
  if p then fields[#fields + 1] = 'payload'; fields[#fields + 1] = p end
  redis.call('XADD', KEYS[4], '*', unpack(fields))
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], 'm:' .. id, 'e:' .. id)
  if not redis.call('ZSCORE', KEYS[1], id) then redis.call('HDEL', KEYS[3], 'p:' .. id) end
  if is_keys then redis.call('ZADD', KEYS[5], now, id) end
  return 2
end
-- ARGV[10], when given and not negative: the delay the handler asked for (no backoff).
local delay = tonumber(ARGV[10] or '-1')
if not delay or delay < 0 then
  delay = base
  for _ = 2, a do
    delay = delay * 2
    if delay >= cap then break end
  end
  if delay > cap then delay = cap end
  delay = math.floor(delay / 2 + delay / 2 * jitter)
end
redis.call('ZREM', KEYS[2], id)
redis.call('ZADD', KEYS[1], now + delay, id)
-- The owner's name leaves the meta record: only a claim makes an item someone's.
redis.call('HSET', KEYS[3], 'e:' .. id, err, 'm:' .. id, string.format('%d:%d:', a, d))
return 1
)lua",
                      false};

const Script kRenew = {"renew", KW_LUA_PRELUDE R"lua(
local owner, lease = ARGV[1], tonumber(ARGV[2])
local ids = ids_from(3)
if #ids == 0 then return 0 end
local z = {}
for _, id in ipairs(held_by(owner, ids)) do
  z[#z + 1] = now + lease
  z[#z + 1] = id
end
if #z > 0 then redis.call('ZADD', KEYS[2], 'XX', unpack(z)) end
return #z / 2
)lua",
                       false};

const Script kRelease = {"release", KW_LUA_PRELUDE R"lua(
-- Items this owner claimed but will not handle (it is stopping): back to due at their
-- deadline, as if never claimed (the attempt is given back).
local owner = ARGV[1]
local n = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  local a, d, o = parse_meta(redis.call('HGET', KEYS[3], 'm:' .. id))
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
)lua",
                         false};

const Script kReplay = {"replay", KW_LUA_PRELUDE R"lua(
local entries
if ARGV[1] ~= '' then
  entries = redis.call('XRANGE', KEYS[4], ARGV[1], ARGV[1])
  if #entries == 0 then return -1 end
else
  entries = redis.call('XRANGE', KEYS[4], '-', '+', 'COUNT', tonumber(ARGV[2]))
end
local is_keys = ARGV[3] == '1'
local n = 0
for _, e in ipairs(entries) do
  local f = {}
  for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
  if f.id then
    redis.call('ZADD', KEYS[1], now, f.id)
    if f.payload then
      redis.call('HSETNX', KEYS[3], '~', SENTINEL)
      -- A tracked key's snapshot is stamped with its (new) deadline.
      redis.call('HSET', KEYS[3], 'p:' .. f.id, is_keys and (now .. '|' .. f.payload) or f.payload)
    end
    redis.call('HDEL', KEYS[3], 'm:' .. f.id, 'e:' .. f.id)
    redis.call('ZREM', KEYS[5], f.id)
    n = n + 1
  end
  redis.call('XDEL', KEYS[4], e[1])
end
return n
)lua",
                        false};

const Script kPurge = {"purge", R"lua(
if ARGV[1] ~= '' then return redis.call('XDEL', KEYS[4], ARGV[1]) end
local n = redis.call('XLEN', KEYS[4])
redis.call('DEL', KEYS[4])
return n
)lua",
                       false};

const Script kInspect = {"inspect", R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local oldest = -1
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if first[2] and tonumber(first[2]) < now then oldest = now - tonumber(first[2]) end
local dead = 0
if redis.call('EXISTS', KEYS[4]) == 1 then dead = redis.call('XLEN', KEYS[4]) end
return {now, redis.call('ZCARD', KEYS[1]), redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. now),
        redis.call('ZCARD', KEYS[2]), dead, oldest}
)lua",
                         false};

const Script *const kAll[] = {&kTrack,    &kUntrack,   &kAdopt,  &kSchedule, &kReschedule, &kCancel,
                              &kClaimDue, &kClaimLive, &kForget, &kAck,      &kFail,       &kRenew,
                              &kRelease,  &kReplay,    &kPurge,  &kInspect};
const size_t kAllCount = sizeof kAll / sizeof kAll[0];

std::vector<std::string> commands() {
    std::set<std::string> names;
    const std::string_view mark = "redis.call('";
    for (size_t i = 0; i < kAllCount; i++) {
        const std::string_view body = kAll[i]->body;
        for (size_t at = body.find(mark); at != std::string_view::npos; at = body.find(mark, at)) {
            at += mark.size();
            const size_t end = body.find('\'', at);
            if (end == std::string_view::npos) break;
            names.insert(std::string(body.substr(at, end - at)));
        }
    }
    return {names.begin(), names.end()};
}

}  // namespace scripts

const std::string &Script::sha() const {
    // Computed once per script, on first use, from any thread.
    static const std::map<const Script *, std::string> table = [] {
        std::map<const Script *, std::string> m;
        for (size_t i = 0; i < scripts::kAllCount; i++)
            m[scripts::kAll[i]] = script_sha1(scripts::kAll[i]->body);
        return m;
    }();
    return table.at(this);
}

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
