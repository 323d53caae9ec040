-- GCRA, the same state machine as src/algorithm/gcra.rs, in microseconds: Lua numbers
-- are doubles, exact only below 2^53, and nanoseconds since the epoch are not.
--
-- KEYS[1]  the key; it holds the theoretical arrival time (TAT), in µs since the epoch
-- ARGV[1]  emission interval, µs per permit
-- ARGV[2]  tolerance: interval × burst, µs
-- ARGV[3]  n, the permits asked for (0 peeks); at most the burst
-- ARGV[4]  optional: now in µs since the epoch, for tests; otherwise the server's TIME
--
-- Returns {admitted 0|1, remaining, retry_after µs, reset_after µs}. Writes only when
-- it admits n > 0, with a TTL that ends when the bucket is full again.

local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local now
if ARGV[4] then
  now = tonumber(ARGV[4])
else
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
end

local tat = now
local stored = redis.call('GET', KEYS[1])
if stored then
  local value = tonumber(stored)
  if not value then
    return redis.error_reply('tollgate: the key does not hold a GCRA state')
  end
  tat = math.max(value, now)
end

-- floor((tolerance - ttl) / interval); a double quotient may round up to the next
-- integer, so check it by an exact product.
local function remaining(ttl)
  local left = tolerance - ttl
  if left <= 0 then
    return 0
  end
  local whole = math.floor(left / interval)
  if whole * interval > left then
    whole = whole - 1
  end
  return whole
end

if n == 0 then
  return {1, remaining(tat - now), 0, tat - now}
end

local new_tat = tat + n * interval
local allow_at = new_tat - tolerance
if allow_at > now then
  return {0, remaining(tat - now), allow_at - now, tat - now}
end

local ttl_ms = math.max(1, math.ceil((new_tat - now) / 1000))
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', string.format('%.0f', ttl_ms))
return {1, remaining(new_tat - now), 0, new_tat - now}
