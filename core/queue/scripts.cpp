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

// A snapshot "<deadline>|<value>": its value if it was taken for deadline d, else false.
#define KW_LUA_UNSTAMP                                                                 \
    "local function unstamp(p, d)\n"                                                   \
    "  if not p then return false end\n"                                               \
    "  local bar = string.find(p, '|', 1, true)\n"                                     \
    "  if not bar or tonumber(string.sub(p, 1, bar - 1)) ~= d then return false end\n" \
    "  return string.sub(p, bar + 1)\n"                                                \
    "end\n"

// Redis's clock, read once: `now` in ms (from the reply `t` of TIME).
#define KW_LUA_TIME_MS "tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)"
#define KW_LUA_NOW                   \
    "local t = redis.call('TIME')\n" \
    "local now = " KW_LUA_TIME_MS "\n"
// The meta record of a claimed item: attempt, deadline, owner.
#define KW_LUA_META                                             \
    "local function parse_meta(m)\n"                            \
    "  if not m then return 0, nil, nil end\n"                  \
    "  local a, d, o = string.match(m, '^(%d+):(%d+):(.*)$')\n" \
    "  return tonumber(a), tonumber(d), o\n"                    \
    "end\n"

// Shared prelude: Redis's clock, the meta record of a claimed item, stamped snapshots.
// Trap: Lua 5.1 turns a number into text (`..`, tostring) with "%.14g", so a deadline of
// 1e14 ms (year 5138) or later, which keywatch accepts, would lose digits: numbers that go
// into a record are written with string.format('%d'), or handed to redis.call as numbers
// (Redis formats those exactly, with "%.17g": about 1 us each on Redis 7.0, so the batch
// scripts below hand it text).
#define KW_LUA_PRELUDE                                                                        \
    KW_LUA_MAX                                                                                \
    KW_LUA_NOW                                                                                \
    "local SENTINEL = string.rep('k', 72)\n" KW_LUA_META KW_LUA_UNSTAMP                       \
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

// KEYS: due, the key, and data only with a snapshot (each key passed costs Redis work per
// call). ARGV[2] is the deadline on this server's clock in plain digits (the client keeps its
// offset): the key's PXAT, its score and the reply are the same text, never a Lua number
// (tonumber is the dearest step of a call).
const Script kTrack = {"track", R"lua(
-- A deadline past the latest keywatch accepts is refused (-9), nothing written. Compared as
-- digits: longer is later, and at equal length the text orders like the number.
local MAX, d = ')lua" KW_MAX_TIME_MS_TEXT R"lua(', ARGV[2]
if #d > #MAX or (#d == #MAX and d > MAX) then return -9 end
-- The common call (no NX/XX, no snapshot) passes two arguments: the least Lua per key.
if #ARGV == 2 then
  redis.call('SET', KEYS[2], ARGV[1], 'PXAT', d)
  redis.call('ZADD', KEYS[1], d, KEYS[2])
  return d
end
local r
if ARGV[3] == 'NX' then r = redis.call('SET', KEYS[2], ARGV[1], 'PXAT', d, 'NX')
elseif ARGV[3] == 'XX' then r = redis.call('SET', KEYS[2], ARGV[1], 'PXAT', d, 'XX')
else r = redis.call('SET', KEYS[2], ARGV[1], 'PXAT', d) end
if not r then return -1 end
redis.call('ZADD', KEYS[1], d, KEYS[2])
if ARGV[4] == '1' then
  redis.call('HSETNX', KEYS[3], '~', string.rep('k', 72))
  redis.call('HSET', KEYS[3], 'p:' .. KEYS[2], d .. '|' .. ARGV[1])
end
return d
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

// KEYS: the rule's queue P (due, data), with queues=2 also queue `keys` K (due, data), then
// the keys to adopt. Every read before the first write; a gone key (-2) is left to the claim
// or `forget`. The item id is the key and its score the key's PEXPIRETIME, read here: any
// number of engines running this for one key write one identical record.
const Script kAdopt = {"adopt", KW_LUA_MAX KW_LUA_UNSTAMP R"lua(
local snap, two, strict = ARGV[1] == '1', ARGV[2] == '2', ARGV[3] == '1'
local PD, PH, KD, KH = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local ids, e = {}, {}
for i = (two and 5 or 3), #KEYS do
  ids[#ids + 1] = KEYS[i]
  e[#ids] = redis.call('PEXPIRETIME', KEYS[i])
end
local n = #ids
if n == 0 then return '' end
if strict then
  if e[1] < 0 then return e[1] end
  if e[1] > MAX_MS then return -9 end
  if snap and redis.call('TYPE', ids[1]).ok ~= 'string' then return -3 end
end
local sp = redis.call('ZMSCORE', PD, unpack(ids))
local sk = two and redis.call('ZMSCORE', KD, unpack(ids)) or {}
local out, add_p, add_k, rem_p, rem_k = {}, {}, {}, {}, {}
local stamp_p, stamp_k, values = {}, {}, {}
for i = 1, n do
  local id, x = ids[i], e[i]
  local p, k = sp[i] and tonumber(sp[i]), sk[i] and tonumber(sk[i])
  local c = 'g'
  if x == -1 then
    c = 'n'
    if p then c, rem_p[#rem_p + 1] = 'u', id end
    if k then c, rem_k[#rem_k + 1] = 'u', id end
  elseif x > MAX_MS then
    c = 'x'
  elseif x >= 0 then
    -- A key tracked in `keys` keeps its record there; else the rule's queue.
    local cur, add, stamp = p, add_p, stamp_p
    if k then cur, add, stamp = k, add_k, stamp_k end
    if cur == x then c = '=' elseif cur then c = 'r' else c = 'a' end
    if c ~= '=' then
      add[#add + 1] = x
      add[#add + 1] = id
      if cur then stamp[#stamp + 1] = {id, cur, x} end
    end
    if snap and not k then
      if redis.call('TYPE', id).ok == 'string' then
        values[#values + 1] = {id, x, redis.call('GET', id)}
      else
        c = 'S'
      end
    end
  end
  out[i] = c
end
local function fields(list)
  local f = {}
  for j, s in ipairs(list) do f[j] = 'p:' .. s[1] end
  return f
end
local old_p = #stamp_p > 0 and redis.call('HMGET', PH, unpack(fields(stamp_p))) or {}
local old_k = #stamp_k > 0 and redis.call('HMGET', KH, unpack(fields(stamp_k))) or {}
local old_v = #values > 0 and redis.call('HMGET', PH, unpack(fields(values))) or {}
-- Writes.
if #add_p > 0 then redis.call('ZADD', PD, unpack(add_p)) end
if #add_k > 0 then redis.call('ZADD', KD, unpack(add_k)) end
local function untrack(due, data, list)
  if #list == 0 then return end
  redis.call('ZREM', due, unpack(list))
  local h = {}
  for _, id in ipairs(list) do
    local n = #h
    h[n + 1], h[n + 2], h[n + 3] = 'p:' .. id, 'm:' .. id, 'e:' .. id
  end
  redis.call('HDEL', data, unpack(h))
end
untrack(PD, PH, rem_p)
untrack(KD, KH, rem_k)
local function restamp(data, list, olds)
  local h = {}
  for j, s in ipairs(list) do
    local v = unstamp(olds[j], s[2])
    if v then
      h[#h + 1] = 'p:' .. s[1]
      h[#h + 1] = string.format('%d|', s[3]) .. v
    end
  end
  if #h > 0 then redis.call('HSET', data, unpack(h)) end
end
restamp(PH, stamp_p, old_p)
restamp(KH, stamp_k, old_k)
local h = {}
for j, v in ipairs(values) do
  local stamped = string.format('%d|', v[2]) .. v[3]
  if old_v[j] ~= stamped then
    h[#h + 1] = 'p:' .. v[1]
    h[#h + 1] = stamped
  end
end
if #h > 0 then
  redis.call('HSETNX', PH, '~', string.rep('k', 72))
  redis.call('HSET', PH, unpack(h))
end
if strict then return e[1] end
return table.concat(out)
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

// ---- The batch layout (issue 23 §2; docs/reliable-delivery.md "Data in Redis") ----------
// One claim = one batch: its items live in a batch key `c:<owner>:<seq>` (id -> deadline),
// its owner and lease once, as the member `<owner>:<seq>:<b>` of `leases` (score = lease
// end). `inflight` keeps id -> BASE + b (BASE = 2^52) for every item of a batch, so that
// schedule NX, cancel, reschedule and a live claim still see "in flight"; a score below BASE
// is an item claimed by a version-1 engine (score = its lease end), read and reclaimed here
// after its lease like version 1 did. `m:<id>` ("attempt:deadline:", the version-1 format
// with no owner) exists only for items whose attempt is > 1. For `keys`, a batch acked whole
// leaves its items in `inflight` as done records (the marker `d:<b>` in `leases`, score
// -(ack time)), pruned with the done window.
#define KW_LUA_BATCH                                            \
    "local BASE = 4503599627370496\n"                           \
    "local function fmt(x) return string.format('%d', x) end\n" \
    "local function member_of(owner, seq, b) return owner .. ':' .. seq .. ':' .. fmt(b) end\n"
// The claims' helpers.
#define KW_LUA_CLAIM                                                                            \
    "-- The new batch: b from seq, every item in inflight at BASE + b, the lease member.\n"     \
    "local function open_batch(kin, kleases, kseq, ids, owner, seq, lease_end)\n"               \
    "  local b = redis.call('INCR', kseq)\n"                                                    \
    "  local s = fmt(BASE + b)\n"                                                               \
    "  for i = 1, #ids, 2000 do\n"                                                              \
    "    local z = {}\n"                                                                        \
    "    for j = i, math.min(i + 1999, #ids) do z[#z + 1] = s; z[#z + 1] = ids[j] end\n"        \
    "    redis.call('ZADD', kin, unpack(z))\n"                                                  \
    "  end\n"                                                                                   \
    "  redis.call('ZADD', kleases, fmt(lease_end), member_of(owner, seq, b))\n"                 \
    "  return b\n"                                                                              \
    "end\n"                                                                                     \
    "-- Shared or alone (tracked keys only): alone when at most one subscriber (this engine)\n" \
    "-- listens on the engines channel of this node, so no other engine can hold a late\n"      \
    "-- notification of what this claim takes. With `own` (the engine's heartbeat channel,\n"   \
    "-- which its subscriber subscribes after the engines channel, on the same connection)\n"   \
    "-- that one listener must be this engine: own has a subscriber now. No channel, 'S' or\n"  \
    "-- an error (no PUBSUB permission) mean shared. Returns shared, listeners (-1: not\n"      \
    "-- asked).\n"                                                                              \
    "local function sharing(is_keys, chan, flags, own)\n"                                       \
    "  if not is_keys then return true, -1 end\n"                                               \
    "  if not chan or chan == '' then return true, -1 end\n"                                    \
    "  local with_own = own ~= nil and own ~= ''\n"                                             \
    "  local r\n"                                                                               \
    "  if with_own then r = redis.pcall('PUBSUB', 'NUMSUB', chan, own)\n"                       \
    "  else r = redis.pcall('PUBSUB', 'NUMSUB', chan) end\n"                                    \
    "  if type(r) ~= 'table' or r.err or not r[2] then return true, -1 end\n"                   \
    "  local n = tonumber(r[2])\n"                                                              \
    "  local mine = not with_own or tonumber(r[4] or 0) > 0\n"                                  \
    "  return n > 1 or not mine or string.find(flags or '', 'S', 1, true) ~= nil, n\n"          \
    "end\n"                                                                                     \
    "local function reschedule(id, old, exp)\n"                                                 \
    "  redis.call('ZADD', KEYS[1], fmt(exp), id)\n"                                             \
    "  local v = unstamp(redis.call('HGET', KEYS[4], 'p:' .. id), old)\n"                       \
    "  if v then redis.call('HSET', KEYS[4], 'p:' .. id, fmt(exp) .. '|' .. v) end\n"           \
    "end\n"                                                                                     \
    "local function untrack(id)\n"                                                              \
    "  redis.call('ZREM', KEYS[1], id)\n"                                                       \
    "  redis.call('HDEL', KEYS[4], 'p:' .. id, 'm:' .. id, 'e:' .. id)\n"                       \
    "end\n"

// What the batch scripts start with: the clock, metas, snapshots, the batch helpers. Each
// script takes only the helpers it uses: a Lua function is a closure built on every call.
#define KW_LUA_BATCH_PRELUDE KW_LUA_NOW KW_LUA_META KW_LUA_UNSTAMP KW_LUA_BATCH

namespace batch {

const Script kClaimDue = {"claim_due", KW_LUA_BATCH_PRELUDE KW_LUA_CLAIM R"lua(
local limit, lease, owner, seq = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4]
local is_keys = ARGV[5] == '1'
local window = tonumber(ARGV[6])
local look = string.find(ARGV[7], 'L', 1, true) ~= nil
local nstale = tonumber(ARGV[8])
local DUE, INF, LEASES, DATA, DONE, SEQ, B = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local room = limit
-- Numbers go to redis.call as text and scores stay text where only compared or returned:
-- Redis 7.0 formats a number argument and parses a score with the C library's slow
-- double conversions (about 1 us each, more than most of the calls here).
local now_s = fmt(now)
-- Every read comes before the first write: a tracked key (undeclared) in a slot being
-- migrated fails the script, and a script that failed must have written nothing.
-- 1. Leases that ran out: batches whose key the caller declared are taken now; the others
-- are named in the reply, to be declared by the next call. Then version-1 items. One read
-- of each also tells the tail what is left (the first 17 live lease members and, of
-- version-1 items, one more than are taken), so that it reads again only when more were.
local rc_ids, rc_dl = {}, {}
local olds, stale_out = {}, {}
local ls, vs, v1n = {}, {}, 0
if look then
  local declared = {}
  for i = 1, nstale do declared[ARGV[8 + i]] = KEYS[7 + i] end
  ls = redis.call('ZRANGE', LEASES, '(0', '+inf', 'BYSCORE', 'LIMIT', '0', '17', 'WITHSCORES')
  for i = 1, math.min(#ls, 32), 2 do
    local m = ls[i]
    if tonumber(ls[i + 1]) >= now then break end
    local key = declared[m]
    if key and room > 0 then
      local got = redis.call('ZRANGE', key, '0', fmt(room - 1), 'WITHSCORES')
      local o = {key = key, member = m, ids = {}}
      for j = 1, #got, 2 do
        rc_ids[#rc_ids + 1] = got[j]
        rc_dl[#rc_dl + 1] = tonumber(got[j + 1])
        o.ids[#o.ids + 1] = got[j]
      end
      room = room - #o.ids
      olds[#olds + 1] = o
    else
      stale_out[#stale_out + 1] = m
    end
  end
  vs = redis.call('ZRANGE', INF, '-inf', '(' .. fmt(BASE), 'BYSCORE', 'LIMIT', '0', fmt(room + 1),
                  'WITHSCORES')
  for i = 1, #vs, 2 do
    if v1n >= room or tonumber(vs[i + 1]) >= now then break end
    rc_ids[#rc_ids + 1] = vs[i]
    rc_dl[#rc_dl + 1] = now
    v1n = v1n + 1
  end
  room = room - v1n
end
-- 2. What is due (as stage one did: the first 32 with scores, the rest as ids with their
-- deadlines read as runs). Deadlines stay Redis's score text.
local ids, scores = {}, {}
if room > 0 then
  local head = math.min(room, 32)
  local due = redis.call('ZRANGE', DUE, '-inf', '(' .. now_s, 'BYSCORE', 'LIMIT', '0', fmt(head),
                         'WITHSCORES')
  for i = 1, #due, 2 do
    ids[#ids + 1] = due[i]
    scores[#scores + 1] = due[i + 1]
  end
  if #ids == head and room > head then
    local rest = redis.call('ZRANGE', DUE, '-inf', '(' .. now_s, 'BYSCORE', 'LIMIT', fmt(head),
                            fmt(room - head))
    for _, id in ipairs(rest) do ids[#ids + 1] = id end
    local pos, runs = head, 0
    while pos < #ids do
      if runs >= 4 and pos - head < runs * 8 then
        local r = redis.call('ZRANGE', DUE, fmt(pos), fmt(#ids - 1), 'WITHSCORES')
        for i = 2, #r, 2 do scores[#scores + 1] = r[i] end
        break
      end
      local s = redis.call('ZRANGE', DUE, fmt(pos), fmt(pos), 'WITHSCORES')[2]
      local c = math.min(redis.call('ZCOUNT', DUE, '-inf', s), #ids)
      for i = pos + 1, c do scores[i] = s end
      pos, runs = c, runs + 1
    end
  end
end
-- 3. The keys decide (tracked keys only): gone fires, a later expiry reschedules, no TTL
-- untracks. One EXISTS answers for all when they are all gone, as they usually are.
local fire, fscores, later, untracked, moved = ids, scores, {}, 0, 0
if is_keys and #ids > 0 and redis.call('EXISTS', unpack(ids)) > 0 then
  fire, fscores = {}, {}
  for i, id in ipairs(ids) do
    local exp = redis.call('PEXPIRETIME', id)
    if exp == -2 then
      fire[#fire + 1] = id
      fscores[#fscores + 1] = scores[i]
    else
      later[#later + 1] = {id, tonumber(scores[i]), exp}
    end
  end
end
-- 4. Records (retry metas, payloads, errors): a task queue always looks; `keys` only when
-- its data hash holds more than the '~' a version-1 claim left there.
local recs = not is_keys
local drop_data = false
if is_keys then
  local hl = redis.call('HLEN', DATA)
  if hl == 1 and redis.call('HEXISTS', DATA, '~') == 1 then drop_data = true
  else recs = hl > 0 end
end
local function records(list)
  if not recs or #list == 0 then return nil end
  local n, f = #list, {}
  for i, id in ipairs(list) do f[i], f[n + i], f[2 * n + i] = 'm:' .. id, 'p:' .. id, 'e:' .. id end
  return redis.call('HMGET', DATA, unpack(f)), n
end
local got, gn = records(fire)
local rgot, rn = records(rc_ids)
local shared, listeners = true, -1
if #fire + #rc_ids > 0 then
  shared, listeners = sharing(is_keys, ARGV[9 + nstale], ARGV[7], ARGV[10 + nstale])
end
if not recs and #rc_ids > 0 then
  -- A reclaim always reads the metas: its attempt is counted.
  local f = {}
  for i, id in ipairs(rc_ids) do f[i] = 'm:' .. id end
  rgot, rn = redis.call('HMGET', DATA, unpack(f)), #rc_ids
end
-- Writes. The first one is no DENYOOM command: Redis refuses a script's first such write
-- while memory is full (noeviction), and claims must go on then (acks free memory).
if #fire + #rc_ids + #later > 0 then redis.call('DEL', B) end
for _, l in ipairs(later) do
  if l[3] == -1 then
    untrack(l[1])
    untracked = untracked + 1
  else
    reschedule(l[1], l[2], l[3])
    moved = moved + 1
  end
end
if drop_data then redis.call('DEL', DATA) end
local metas = {}
local extras, reclaimed, runs = {}, {}, {}
local all = {}
if #fire > 0 and #later > 0 then
  -- A key that stays can keep a score below now (its expiry fell between the script's
  -- expiry snapshot and TIME) and so sit among the first #fire by rank: move by id.
  local z = {}
  for i = 1, #fire do z[#z + 1] = fscores[i]; z[#z + 1] = fire[i] end
  redis.call('ZADD', B, unpack(z))
  redis.call('ZREM', DUE, unpack(fire))
elseif #fire > 0 then
  local last = fmt(#fire - 1)
  redis.call('ZRANGESTORE', B, DUE, '0', last)
  redis.call('ZREMRANGEBYRANK', DUE, '0', last)
end
if #fire > 0 then
  for i = 1, #fire do
    all[i] = fire[i]
    local s = fscores[i]
    if #runs > 0 and runs[#runs - 1] == s then runs[#runs] = runs[#runs] + 1
    else runs[#runs + 1] = s; runs[#runs + 1] = 1 end
  end
  if got then
    for i, id in ipairs(fire) do
      local a, d = parse_meta(got[i])
      local p = got[gn + i]
      if d then
        a = a + 1
        redis.call('ZADD', B, 'XX', fmt(d), id)
        metas[#metas + 1] = 'm:' .. id
        metas[#metas + 1] = fmt(a) .. ':' .. fmt(d) .. ':'
      else
        a, d = 1, tonumber(fscores[i])
      end
      if a > 1 or p then
        if is_keys and p then p = unstamp(p, d) end
        extras[#extras + 1] = i
        extras[#extras + 1] = a
        extras[#extras + 1] = d
        extras[#extras + 1] = got[2 * gn + i] or false
        extras[#extras + 1] = p or false
      end
    end
  end
end
if #rc_ids > 0 then
  local z = {}
  for i, id in ipairs(rc_ids) do
    local a, d = parse_meta(rgot[i])
    if a < 1 then a = 1 end
    a = a + 1
    d = d or rc_dl[i]
    z[#z + 1] = fmt(d)
    z[#z + 1] = id
    all[#all + 1] = id
    metas[#metas + 1] = 'm:' .. id
    metas[#metas + 1] = fmt(a) .. ':' .. fmt(d) .. ':'
    local p = recs and rgot[rn + i] or false
    if is_keys and p then p = unstamp(p, d) end
    reclaimed[#reclaimed + 1] = id
    reclaimed[#reclaimed + 1] = d
    reclaimed[#reclaimed + 1] = a
    reclaimed[#reclaimed + 1] = recs and rgot[2 * rn + i] or false
    reclaimed[#reclaimed + 1] = p
  end
  redis.call('ZADD', B, unpack(z))
end
-- A run-out batch left empty goes, and so does one whose key is gone (evicted, deleted):
-- its member would be named run out again and again.
local gone = {}
for _, o in ipairs(olds) do
  if #o.ids > 0 then redis.call('ZREM', o.key, unpack(o.ids)) end
  if redis.call('EXISTS', o.key) == 0 then
    redis.call('ZREM', LEASES, o.member)
    gone[o.member] = true
  end
end
if #metas > 0 then redis.call('HSET', DATA, unpack(metas)) end
local b = -1
local lease_end = now + lease
if #all > 0 and shared then
  b = open_batch(INF, LEASES, SEQ, all, owner, seq, lease_end)
elseif #all > 0 then
  -- Alone: no inflight entries (reclaimed items leave theirs, if any) and no batch number.
  if #rc_ids > 0 then redis.call('ZREM', INF, unpack(rc_ids)) end
  redis.call('ZADD', LEASES, fmt(lease_end), member_of(owner, seq, -1))
end
-- The done window: done records and the items of batches acked whole.
-- Markers go 64 at a time until none is older than the window, at most 1024 per call (the
-- engine prunes again after every 256 batches it acked whole, so pruning keeps pace).
if is_keys and window > 0 then
  redis.call('ZREMRANGEBYSCORE', DONE, '-inf', '(' .. fmt(now - window))
  local pruned, old = 0, {}
  repeat
    old = redis.call('ZRANGE', LEASES, '(' .. fmt(window - now), '(0', 'BYSCORE', 'LIMIT', '0', '64')
    for _, m in ipairs(old) do
      local db = tonumber(string.sub(m, 3))
      if string.sub(m, 1, 2) == 'd:' and db then
        redis.call('ZREMRANGEBYSCORE', INF, fmt(BASE + db), fmt(BASE + db))
      end
      redis.call('ZREM', LEASES, m)
    end
    pruned = pruned + #old
  until #old < 64 or pruned >= 1024
end
local nd = redis.call('ZRANGE', DUE, '0', '0', 'WITHSCORES')
local next_due = nd[2] or -1
local next_lease, live = -2, -1
if look then
  -- What the reads of step 1 saw, less what this claim took or removed, plus its batch.
  -- The leases left: the first member read that is still there (members are read in
  -- order, so no unread one comes before it), and this claim's own.
  next_lease = -1
  local nlive = #ls / 2
  for i = 1, #ls, 2 do
    if gone[ls[i]] then nlive = nlive - 1
    elseif next_lease < 0 then next_lease = tonumber(ls[i + 1]) end
  end
  if #all > 0 then
    nlive = nlive + 1
    if next_lease < 0 or lease_end < next_lease then next_lease = lease_end end
  end
  if #ls == 34 then nlive = redis.call('ZCOUNT', LEASES, '(0', '+inf') end
  -- Version-1 items left: the first not taken leases one.
  local v1_left = #vs / 2 - v1n
  if v1_left > 0 then
    local s = tonumber(vs[2 * v1n + 2])
    if next_lease < 0 or s < next_lease then next_lease = s end
  end
  if #vs == 2 * (room + v1n + 1) then v1_left = redis.call('ZCOUNT', INF, '-inf', '(' .. fmt(BASE)) end
  live = nlive + v1_left
end
return {now, next_due, next_lease, live, b, fire, runs, reclaimed, extras, stale_out, untracked, moved,
        listeners}
)lua",
                          false};

// Live events of one slot queue (the event keys declared from KEYS[8]). One answer per
// id: 'C' claimed (its item follows in `items`), 'T' held or finished by an engine, 'D'
// done recently, 'R' not expired after all, 'U' not tracked; version 1's rules, unchanged.
const Script kClaimLive = {"claim_live", KW_LUA_BATCH_PRELUDE KW_LUA_CLAIM R"lua(
local lease, owner, seq = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local expired_events = ARGV[4] == 'x'
local DUE, INF, LEASES, DATA, DONE, SEQ, B = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
-- The batch keys of the caller's claims on their way before this call (KEYS[8..]): an item
-- one of them took alone has no inflight entry, yet is taken.
local npend = tonumber(ARGV[7] or '0')
local ids = {}
for i = 8 + npend, #KEYS do ids[#ids + 1] = KEYS[i] end
local res = {}
if #ids == 0 then return {now, res, {}, -1, -1} end
local scores = redis.call('ZMSCORE', DUE, unpack(ids))
local missing = {}
for i = 1, #ids do
  if not scores[i] then missing[#missing + 1] = ids[i] end
end
local held, done = {}, {}
if #missing > 0 then
  local h = redis.call('ZMSCORE', INF, unpack(missing))
  local d = redis.call('ZMSCORE', DONE, unpack(missing))
  for j, id in ipairs(missing) do
    held[id] = h[j]
    done[id] = d[j]
  end
  for k = 8, 7 + npend do
    local p = redis.call('ZMSCORE', KEYS[k], unpack(missing))
    for j, id in ipairs(missing) do held[id] = held[id] or p[j] end
  end
end
local fire, fscores = {}, {}
local live_fire = false
for i = 1, #ids do live_fire = live_fire or scores[i] ~= false end
local shared, listeners = true, -1
if live_fire then shared, listeners = sharing(true, ARGV[5], ARGV[6], ARGV[8]) end
for i, id in ipairs(ids) do
  if scores[i] then
    local score = tonumber(scores[i])
    local exp = -2
    local fscore = score
    if not expired_events then
      exp = redis.call('PEXPIRETIME', id)
    elseif score >= now then
      local mp = redis.call('HMGET', DATA, 'm:' .. id, 'p:' .. id)
      if mp[1] then
        exp = score  -- a retry waiting for its backoff
      else
        exp = redis.call('PEXPIRETIME', id)
        if exp == -2 then
          -- Its TTL was shortened outside keywatch: due now, whatever its score says.
          fscore = now
          local v = unstamp(mp[2], score)
          if v then redis.call('HSET', DATA, 'p:' .. id, fmt(now) .. '|' .. v) end
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
      res[i] = 'C'
    end
  elseif held[id] then
    res[i] = 'T'
  elseif done[id] then
    res[i] = 'D'
  else
    res[i] = 'U'
  end
end
local items, b = {}, -1
if #fire > 0 then
  redis.call('ZREM', DUE, unpack(fire))
  local n, f = #fire, {}
  for i, id in ipairs(fire) do f[i], f[n + i], f[2 * n + i] = 'm:' .. id, 'p:' .. id, 'e:' .. id end
  local got = redis.call('HMGET', DATA, unpack(f))
  local z, metas = {}, {}
  for i, id in ipairs(fire) do
    local a, d = parse_meta(got[i])
    if d then
      a = a + 1
      metas[#metas + 1] = 'm:' .. id
      metas[#metas + 1] = fmt(a) .. ':' .. fmt(d) .. ':'
    else
      a, d = 1, fscores[i]
    end
    z[#z + 1] = d
    z[#z + 1] = id
    items[#items + 1] = id
    items[#items + 1] = d
    items[#items + 1] = a
    items[#items + 1] = got[2 * n + i] or false
    items[#items + 1] = unstamp(got[n + i], d)
  end
  redis.call('ZADD', B, unpack(z))
  if #metas > 0 then redis.call('HSET', DATA, unpack(metas)) end
  if shared then
    b = open_batch(INF, LEASES, SEQ, fire, owner, seq, now + lease)
  else
    redis.call('ZADD', LEASES, now + lease, member_of(owner, seq, -1))
  end
end
return {now, res, items, b, listeners}
)lua",
                           false};

// Acks of any number of batches of one queue. ARGV: owner is_keys, then per batch
// seq b kind, kind '*' (every item still in the batch) or 'i' followed by n and n ids; the
// batch keys are KEYS[6..], one per batch in order. A batch whose lease member is gone was
// reclaimed: its acks are refused (0). Replies the acked count per batch.
const Script kAck = {"ack", KW_LUA_BATCH R"lua(
-- Redis's clock, read once, and only by an ack that writes a time (a shared batch of keys).
local now_s
local function clock()
  if not now_s then
    local t = redis.call('TIME')
    now_s = fmt()lua" KW_LUA_TIME_MS R"lua()
  end
  return now_s
end
local DUE, INF, LEASES, DATA, DONE = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local owner, is_keys = ARGV[1], ARGV[2] == '1'
local recs = redis.call('EXISTS', DATA) == 1
local res = {}
local at, g = 3, 0
while at <= #ARGV do
  g = g + 1
  local seq, b, kind = ARGV[at], tonumber(ARGV[at + 1]), ARGV[at + 2]
  at = at + 3
  local ids
  if kind == 'i' then
    local n = tonumber(ARGV[at])
    ids = {}
    for j = 1, n do ids[j] = ARGV[at + j] end
    at = at + n + 1
  end
  local B = KEYS[5 + g]
  local member = member_of(owner, seq, b)
  local acked = 0
  if not ids and not recs then
    -- The whole batch, nothing per item: its member goes (there: the batch is ours).
    if redis.call('ZREM', LEASES, member) == 1 then
      acked = redis.call('ZCARD', B)
      redis.call('DEL', B)
      if b >= 0 and is_keys then
        redis.call('ZADD', LEASES, '-' .. clock(), 'd:' .. fmt(b))
      elseif b >= 0 then
        redis.call('ZREMRANGEBYSCORE', INF, fmt(BASE + b), fmt(BASE + b))
      end
    end
  elseif redis.call('ZSCORE', LEASES, member) then
    if not ids then ids = redis.call('ZRANGE', B, '0', '-1') end
    local mine = {}
    if #ids > 0 then
      local sc = redis.call('ZMSCORE', B, unpack(ids))
      for j, id in ipairs(ids) do
        if sc[j] then mine[#mine + 1] = id end
      end
    end
    if #mine > 0 then
      redis.call('ZREM', B, unpack(mine))
      if b >= 0 then redis.call('ZREM', INF, unpack(mine)) end
      if is_keys and b >= 0 then
        local z = {}
        local at_s = clock()
        for _, id in ipairs(mine) do z[#z + 1] = at_s; z[#z + 1] = id end
        redis.call('ZADD', DONE, unpack(z))
      end
      if recs then
        local again = redis.call('ZMSCORE', DUE, unpack(mine))
        local gone = {}
        for j, id in ipairs(mine) do
          gone[#gone + 1] = 'm:' .. id
          gone[#gone + 1] = 'e:' .. id
          if not again[j] then gone[#gone + 1] = 'p:' .. id end
        end
        redis.call('HDEL', DATA, unpack(gone))
      end
    end
    if redis.call('EXISTS', B) == 0 then redis.call('ZREM', LEASES, member) end
    acked = #mine
  end
  res[g] = acked
end
return res
)lua",
                     false};

// One item failed. KEYS: due inflight leases data dead done batch. ARGV: owner seq b is_keys
// id error reject max_attempts retry_base_ms retry_max_ms jitter [retry_delay_ms].
// 0 refused (not this batch's, or the batch was reclaimed), 1 retry, 2 dead letter.
const Script kFail = {"fail", KW_LUA_BATCH_PRELUDE R"lua(
local DUE, INF, LEASES, DATA, DEAD, DONE, B = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local b = tonumber(ARGV[3])
local member = member_of(ARGV[1], ARGV[2], b)
local is_keys, id, err = ARGV[4] == '1', ARGV[5], ARGV[6]
local reject, max_attempts = ARGV[7] == '1', tonumber(ARGV[8])
local base, cap, jitter = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
if not redis.call('ZSCORE', LEASES, member) then return 0 end
local ds = redis.call('ZSCORE', B, id)
if not ds then return 0 end
local a, d = parse_meta(redis.call('HGET', DATA, 'm:' .. id))
if a < 1 then a = 1 end
d = d or tonumber(ds)
local function leave()
  redis.call('ZREM', B, id)
  if b >= 0 then redis.call('ZREM', INF, id) end
  if redis.call('EXISTS', B) == 0 then redis.call('ZREM', LEASES, member) end
end
if reject or a >= max_attempts then
  -- Dead letter first, then out of flight: one script, so never one without the other.
  local p = redis.call('HGET', DATA, 'p:' .. id)
  if is_keys then p = unstamp(p, d) end
  local fields = {'id', id, 'attempts', a, 'deadline', d, 'error', err, 'failed_ms', now}
  if p then fields[#fields + 1] = 'payload'; fields[#fields + 1] = p end
  redis.call('XADD', DEAD, '*', unpack(fields))
  leave()
  redis.call('HDEL', DATA, 'm:' .. id, 'e:' .. id)
  if not redis.call('ZSCORE', DUE, id) then redis.call('HDEL', DATA, 'p:' .. id) end
  if is_keys and b >= 0 then redis.call('ZADD', DONE, now, id) end
  return 2
end
local delay = tonumber(ARGV[12] or '-1')
if not delay or delay < 0 then
  delay = base
  for _ = 2, a do
    delay = delay * 2
    if delay >= cap then break end
  end
  if delay > cap then delay = cap end
  delay = math.floor(delay / 2 + delay / 2 * jitter)
end
leave()
redis.call('ZADD', DUE, now + delay, id)
redis.call('HSET', DATA, 'e:' .. id, err, 'm:' .. id, fmt(a) .. ':' .. fmt(d) .. ':')
return 1
)lua",
                      false};

// Items claimed but not handled (stop, hold freed or timed out): due again at their
// deadline, the attempt given back. KEYS: due inflight leases data, then one batch key per
// batch. ARGV: owner, then per batch seq b kind('*' | 'i' n ids...). Returns the count.
const Script kRelease = {"release", KW_LUA_BATCH_PRELUDE R"lua(
local DUE, INF, LEASES, DATA = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner = ARGV[1]
local total = 0
local at, g = 2, 0
while at <= #ARGV do
  g = g + 1
  local seq, b, kind = ARGV[at], tonumber(ARGV[at + 1]), ARGV[at + 2]
  at = at + 3
  local B = KEYS[4 + g]
  local ids, dls = {}, {}
  if kind == 'i' then
    local n = tonumber(ARGV[at])
    for j = 1, n do ids[j] = ARGV[at + j] end
    at = at + n + 1
  end
  local member = member_of(owner, seq, b)
  if redis.call('ZSCORE', LEASES, member) then
    local found = {}
    if kind == 'i' then
      if #ids > 0 then
        local sc = redis.call('ZMSCORE', B, unpack(ids))
        for j, id in ipairs(ids) do
          if sc[j] then found[#found + 1] = id; dls[#found] = tonumber(sc[j]) end
        end
      end
    else
      local r = redis.call('ZRANGE', B, 0, -1, 'WITHSCORES')
      for j = 1, #r, 2 do found[#found + 1] = r[j]; dls[#found] = tonumber(r[j + 1]) end
    end
    if #found > 0 then
      local mf = {}
      for j, id in ipairs(found) do mf[j] = 'm:' .. id end
      local metas = redis.call('HMGET', DATA, unpack(mf))
      local z, back, gone = {}, {}, {}
      for j, id in ipairs(found) do
        local a, d = parse_meta(metas[j])
        d = d or dls[j]
        z[#z + 1] = d
        z[#z + 1] = id
        if a - 1 >= 2 then
          back[#back + 1] = mf[j]
          back[#back + 1] = fmt(a - 1) .. ':' .. fmt(d) .. ':'
        elseif metas[j] then
          gone[#gone + 1] = mf[j]
        end
      end
      redis.call('ZREM', B, unpack(found))
      if b >= 0 then redis.call('ZREM', INF, unpack(found)) end
      redis.call('ZADD', DUE, unpack(z))
      if #back > 0 then redis.call('HSET', DATA, unpack(back)) end
      if #gone > 0 then redis.call('HDEL', DATA, unpack(gone)) end
      total = total + #found
    end
    if redis.call('EXISTS', B) == 0 then redis.call('ZREM', LEASES, member) end
  end
end
return total
)lua",
                         false};

// Renews the leases of batches still held. KEYS: leases. ARGV: lease_ms member...
// Replies 1 per member renewed, 0 per member gone (reclaimed: its items are not ours).
const Script kRenew = {"renew", KW_LUA_BATCH_PRELUDE R"lua(
local lease = tonumber(ARGV[1])
local members = {}
for i = 2, #ARGV do members[#members + 1] = ARGV[i] end
if #members == 0 then return {} end
local sc = redis.call('ZMSCORE', KEYS[1], unpack(members))
local z, res = {}, {}
for i, m in ipairs(members) do
  if sc[i] and tonumber(sc[i]) > 0 then
    z[#z + 1] = now + lease
    z[#z + 1] = m
    res[i] = 1
  else
    res[i] = 0
  end
end
if #z > 0 then redis.call('ZADD', KEYS[1], 'XX', unpack(z)) end
return res
)lua",
                       false};

// The queue's figures. KEYS: the five queue keys, then leases. Replies {now, due, due_now, dead,
// oldest, v1_inflight, live members...}; the caller adds the ZCARD of each live member's
// batch key to v1_inflight for the number in flight.
const Script kInspect = {"inspect", KW_LUA_BATCH R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local oldest = -1
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if first[2] and tonumber(first[2]) < now then oldest = now - tonumber(first[2]) end
local dead = 0
if redis.call('EXISTS', KEYS[4]) == 1 then dead = redis.call('XLEN', KEYS[4]) end
return {now, redis.call('ZCARD', KEYS[1]), redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. fmt(now)),
        dead, oldest, redis.call('ZCOUNT', KEYS[2], '-inf', '(' .. fmt(BASE)),
        redis.call('ZRANGE', KEYS[6], '(0', '+inf', 'BYSCORE')}
)lua",
                         false};

}  // namespace batch

const Script *const kAll[] = {&kTrack,
                              &kUntrack,
                              &kAdopt,
                              &kSchedule,
                              &kReschedule,
                              &kCancel,
                              &kClaimDue,
                              &kClaimLive,
                              &kForget,
                              &kAck,
                              &kFail,
                              &kRenew,
                              &kRelease,
                              &kReplay,
                              &kPurge,
                              &kInspect,
                              &batch::kClaimDue,
                              &batch::kClaimLive,
                              &batch::kAck,
                              &batch::kFail,
                              &batch::kRelease,
                              &batch::kRenew,
                              &batch::kInspect};
const size_t kAllCount = sizeof kAll / sizeof kAll[0];

std::vector<std::string> commands() {
    std::set<std::string> names;
    for (const std::string_view mark : {"redis.call('", "redis.pcall('"}) {
        for (size_t i = 0; i < kAllCount; i++) {
            const std::string_view body = kAll[i]->body;
            for (size_t at = body.find(mark); at != std::string_view::npos;
                 at = body.find(mark, at)) {
                at += mark.size();
                const size_t end = body.find('\'', at);
                if (end == std::string_view::npos) break;
                std::string name(body.substr(at, end - at));
                // A command with subcommands is granted by subcommand: PUBSUB|NUMSUB.
                const std::string_view sub = ", '";
                if (name == "PUBSUB" && body.substr(end + 1, sub.size()) == sub) {
                    const size_t from = end + 1 + sub.size();
                    const size_t to = body.find('\'', from);
                    if (to == std::string_view::npos) break;
                    name += "|" + std::string(body.substr(from, to - from));
                }
                names.insert(std::move(name));
            }
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
