-- The fleet usage counter of src/shed/redis.rs: every slot in use is a lease, one
-- member of a sorted set scored by the instant its lease runs out (µs since the epoch,
-- on the server's TIME). A slot whose holder dies is never renewed nor given back: it
-- runs out on its own, whatever the other slots do.
--
-- KEYS[1]  the sorted set of leases
-- ARGV[1]  "take" | "renew" | "give_back" | "count"
--   take       ARGV[2] limit, ARGV[3] "1" to take past the limit too, ARGV[4] lease µs,
--              ARGV[5] the new lease's id
--              -> {1 if taken, 0 if not, -1 if the id is a live lease's;
--                  in use after; 1 if within the limit else 0}
--   renew      ARGV[2] id, ARGV[3] lease µs -> 1, or 0 if the lease had run out
--   give_back  ARGV[2] id -> 1, or 0 if the lease had run out
--   count      -> the leases not run out
--
-- Lease ids are drawn by the caller (random 64-bit numbers, kept as strings here), not
-- counted in Redis: a counter would start again from 1 after a restart without
-- persistence, and a lease from before the restart would then name, give back and
-- renew one taken after it.
--
-- The set's key lives as long as its longest lease, plus a second of slack; an empty
-- set is deleted by Redis itself. Scores stay below 2^53 (now plus a lease of at most
-- 2^52 µs), so doubles hold them exactly.

local EXPIRY_SLACK_MS = 1000

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local op = ARGV[1]

-- An integer as a string, exact below 2^53 (tostring would switch to exponents).
local function int(x)
  return string.format('%.0f', x)
end

if op == 'count' then
  return redis.call('ZCOUNT', KEYS[1], '(' .. int(now), '+inf')
end

-- Leases that ran out are gone before anything is counted or renewed.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', int(now))

-- Keeps the set until its last lease runs out.
local function keep_until_last()
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if #last == 2 then
    local ms = math.ceil((tonumber(last[2]) - now) / 1000) + EXPIRY_SLACK_MS
    redis.call('PEXPIRE', KEYS[1], int(ms))
  end
end

if op == 'take' then
  local limit = tonumber(ARGV[2])
  local anyway = ARGV[3] == '1'
  local lease = tonumber(ARGV[4])
  local in_use = redis.call('ZCARD', KEYS[1])
  local within = in_use < limit
  if not within and not anyway then
    return {0, in_use, 0}
  end
  local id = ARGV[5]
  -- Two live leases never share an id: the caller draws another.
  if redis.call('ZSCORE', KEYS[1], id) ~= false then
    return {-1, in_use, 0}
  end
  redis.call('ZADD', KEYS[1], int(now + lease), id)
  keep_until_last()
  return {1, in_use + 1, within and 1 or 0}
elseif op == 'renew' then
  local id = ARGV[2]
  if redis.call('ZSCORE', KEYS[1], id) == false then
    return 0
  end
  redis.call('ZADD', KEYS[1], 'XX', int(now + tonumber(ARGV[3])), id)
  keep_until_last()
  return 1
elseif op == 'give_back' then
  local removed = redis.call('ZREM', KEYS[1], ARGV[2])
  keep_until_last()
  return removed
end
return redis.error_reply('TOLLGATE_UNKNOWN_OP ' .. tostring(op))
