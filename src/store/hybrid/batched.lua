-- tollgate batched counting: one fixed window's shared counter.
--
-- KEYS[1]  the counter of one key in one window: {prefix}:{tag}:{name}:{window index}
-- ARGV[1]  "add"  adds n whatever the count (a node's admissions, already decided);
--          "add_take" adds n, then ARGV[5] more only if the count stays within the
--          limit (a node's sync that decides its request on the count it reads);
--          "take" adds n only if the count stays within the limit;
--          "peek" decides as "take" would, writing nothing
-- ARGV[2]  n
-- ARGV[3]  TTL in ms: until the window ends, plus slack
-- ARGV[4]  the limit, for "add_take", "take" and "peek"
-- ARGV[5]  for "add_take", the permits to take
--
-- Returns {admitted (1 or 0), the count after the call}. Every write sets the TTL, so
-- no counter outlives its window by more than the slack.

local key = KEYS[1]
local op = ARGV[1]
local n = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])

local ok, stored = pcall(redis.call, 'GET', key)
local count = 0
if ok and stored then
  count = tonumber(stored)
end
if not ok or count == nil then
  return redis.error_reply('TOLLGATE_CONFLICT the key holds something other than a batched counter')
end

if op == 'peek' then
  if count + n <= limit then
    return {1, count}
  end
  return {0, count}
end
if op == 'add_take' then
  local take = tonumber(ARGV[5])
  count = redis.call('INCRBY', key, n)
  local admitted = 0
  if count + take <= limit then
    count = redis.call('INCRBY', key, take)
    admitted = 1
  end
  redis.call('PEXPIRE', key, ttl)
  return {admitted, count}
end
if op == 'add' or count + n <= limit then
  count = redis.call('INCRBY', key, n)
  redis.call('PEXPIRE', key, ttl)
  return {1, count}
end
return {0, count}
