-- tollgate-rls quota leases (src/quota/lease.rs): one bucket's limit shared by the
-- replicas of the service. The Rust reference is src/quota/fleet.rs (`Ledger`,
-- `targets`); a differential test holds this script to it.
--
-- KEYS[1]  the bucket's ledger, a hash: field the lease id (16 hex digits), value
--          "want granted expires" (want an integer or "inf"; expires in ms of the
--          server's TIME).
-- ARGV[1]  "take" | "renew" | "give_back"; ARGV[2] the lease id
--
--   take, renew  ARGV[3] the limit (tokens per unit, at most 2^52), ARGV[4] the
--                want, ARGV[5] the record's time to live (ms)
--                -> {status: 1, or -1 when take names a live lease;
--                    granted, target, live leases}
--   give_back    -> 1 if the lease was live, else 0
--
-- Expired records go first. The lease's target is its max-min fair share of the
-- limit on the wants of every live lease; it is granted that, cut to what the other
-- live leases' grants leave, so the grants of live leases never add up to more than
-- the limit. The key lives as long as its longest-lived record.

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local ledger, op, id = KEYS[1], ARGV[1], ARGV[2]

if op == 'give_back' then
  -- A hash left empty is deleted by Redis itself.
  return redis.call('HDEL', ledger, id)
end

local function int(x)
  return string.format('%.0f', x)
end

-- floor(a / b) for integers 0 <= a < 2^53, 1 <= b, checked by exact products.
local function div_floor(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

local MAX = 4503599627370496 -- 2^52
local INF = 1 / 0
local function want_of(text)
  if text == 'inf' then
    return INF
  end
  local n = tonumber(text)
  if n == nil or n < 0 then
    return nil
  end
  return math.min(n, MAX)
end

local limit, want_text, ttl = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local want = want_of(want_text)
if want == nil or limit == nil or limit < 0 or ttl == nil or ttl < 1 then
  return redis.error_reply('TOLLGATE_BAD_ARGUMENT lease ' .. ledger)
end
limit = math.min(math.floor(limit), MAX)

local leases, held, latest, live = {}, 0, now + ttl, false
local fields = redis.call('HGETALL', ledger)
for i = 1, #fields, 2 do
  local other, record = fields[i], fields[i + 1]
  local w, g, e = string.match(record, '^(%S+) (%d+) (%d+)$')
  local w_n = w and want_of(w)
  if w_n == nil or tonumber(e) <= now then
    -- Expired (its replica stopped calling), or not a record: gone.
    redis.call('HDEL', ledger, other)
  elseif other == id then
    live = true
  else
    leases[#leases + 1] = {id = other, want = w_n}
    held = held + tonumber(g)
    latest = math.max(latest, tonumber(e))
  end
end
if live and op == 'take' then
  return {-1, 0, 0, 0}
end
local mine = {id = id, want = want}
leases[#leases + 1] = mine

-- fleet.rs `targets`: by want then id; the want or an equal share of what is left,
-- whichever is less; what nobody asked for shared equally, the remainder to the
-- first.
table.sort(leases, function(a, b)
  if a.want ~= b.want then
    return a.want < b.want
  end
  return a.id < b.id
end)
local n, left = #leases, limit
for k, lease in ipairs(leases) do
  local fair = div_floor(left, n - k + 1)
  lease.given = math.min(lease.want, fair)
  left = left - lease.given
end
if left > 0 then
  local each = div_floor(left, n)
  local extra = left - each * n
  for k, lease in ipairs(leases) do
    lease.given = lease.given + each
    if k <= extra then
      lease.given = lease.given + 1
    end
  end
end

local target = mine.given
local granted = math.min(target, math.max(0, limit - held))
redis.call('HSET', ledger, id, want_text .. ' ' .. int(granted) .. ' ' .. int(now + ttl))
redis.call('PEXPIRE', ledger, int(latest - now))
-- Integers below 2^53 reach the caller exactly.
return {1, granted, target, n}
