-- tollgate leases (src/store/hybrid/lease.rs): slices of one key's quota handed to
-- processes, which admit from them locally. Every grant is decided here, atomically,
-- on the server's TIME, so the slices granted never add up to more than the rule
-- admits.
--
-- KEYS[1]  the key's state, a hash:
--            "k"       the rule's kind ("fixed_window", "sliding_counter" or "gcra");
--            fixed window: "w" the window's index, "g" the permits granted in it;
--            sliding counter: "w" the window's index, "c" the permits granted in it,
--            "p" those granted in the window before;
--            GCRA: "t" the theoretical arrival time (µs), "r" the credit given back
--            by leases so far (µs);
--            "l:<id>"  each live lease: windows "unused-at-most"; GCRA
--                      "unused-at-most tat-after-grant r-at-grant".
-- KEYS[2]  the live leases by the time their record may go (µs), a sorted set.
-- ARGV[1]  "take" | "give_back"
-- ARGV[2]  the kind; ARGV[3..5] the rule: fixed window {limit, window µs, offset µs},
--          sliding counter {limit, window µs, 0}, GCRA {interval µs, tolerance µs
--          (interval × burst), burst}
--
--   take       ARGV[6] the new lease's id, ARGV[7] need, ARGV[8] want, ARGV[9] divisor,
--              ARGV[10] the lease's term (µs), ARGV[11..] pairs (id, unused) of
--              leases to settle first
--              -> {status: 1 granted, 0 denied, -1 the id is a live lease's;
--                  granted, valid µs, remaining after, retry µs (denied: until
--                  `need` would fit; granted with nothing left: until one more
--                  would), reset µs}
--   give_back  ARGV[6..] pairs (id, unused) -> permits credited
--
-- A grant is `need` plus up to min(want, floor(available / divisor)) more: large
-- while much is left, down to `need` alone (exact) near the limit.
--
-- Lease ids are random 64-bit numbers drawn by the caller (src/store/lease_id.rs):
-- after a restart without persistence, a lease from before it names nothing here.
--
-- Giving back. A window's count is a plain sum within the window, so unused permits
-- come off it exactly (a lease ends with its window, and its record with it). A GCRA's state is not a sum: the TAT is clamped to
-- `now` whenever the bucket refills completely, and subtracting a lease's unused
-- intervals after such a clamp would credit time that already came back. So a give
-- back credits at most `tat_after - (r_now - r_grant) - now`, a lower bound of the
-- debt the bucket carried at every instant since the grant (only give-backs lower
-- the TAT, and `r` counts them): the credit never exceeds what an exact bucket that
-- had granted only the permits used would hold.

local EXPIRY_SLACK_MS = 1000
-- How long after its term a lease may still be given back (µs).
local GRACE = 1000000
-- Records pruned per call, at most.
local PRUNE = 32

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])

local state, leases = KEYS[1], KEYS[2]
local op, kind = ARGV[1], ARGV[2]
local p = {tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])}

local function int(x)
  return string.format('%.0f', x)
end

local function conflict()
  return redis.error_reply('TOLLGATE_CONFLICT ' .. state)
end

-- floor(a / b) for integers 0 <= a, 1 <= b, below 2^53, checked by exact products.
local function div_floor(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

-- floor(a × b / c) and the remainder, exact for integers a, b < 2^53 and
-- 0 < c <= 2^52 whose quotient is below 2^53 (sliding_counter.lua's).
local function mul_div(a, b, c)
  local product = a * b
  if product < 9007199254740992 then
    local r = math.fmod(product, c)
    return (product - r) / c, r
  end
  local ra = math.fmod(a, c)
  local qa = (a - ra) / c
  local q, r, bit = 0, 0, 4503599627370496
  while bit >= 1 do
    q, r = 2 * q, 2 * r
    if r >= c then
      q, r = q + 1, r - c
    end
    if b >= bit then
      b = b - bit
      q, r = q + qa, r + ra
      if r >= c then
        q, r = q + 1, r - c
      end
    end
    bit = bit / 2
  end
  return q, r
end

local ok, stored_kind = pcall(redis.call, 'HGET', state, 'k')
if not ok or (stored_kind and stored_kind ~= kind) then
  return conflict()
end

-- Leases whose records may go: their holders are past their terms.
local gone = redis.call('ZRANGEBYSCORE', leases, '-inf', int(now), 'LIMIT', 0, PRUNE)
for _, id in ipairs(gone) do
  redis.call('HDEL', state, 'l:' .. id)
  redis.call('ZREM', leases, id)
end

-- The state at now: what is available, and how to take, credit and keep it.
local view = {}

if kind == 'fixed_window' then
  local limit, window, offset = p[1], p[2], p[3]
  local index = div_floor(now + offset, window)
  local finish = (index + 1) * window - offset
  local granted = 0
  if tonumber(redis.call('HGET', state, 'w')) == index then
    granted = tonumber(redis.call('HGET', state, 'g')) or 0
  elseif stored_kind then
    -- A new window: the last one's leases die with it.
    redis.call('DEL', state, leases)
  end
  view.available = function()
    return math.max(limit - granted, 0)
  end
  view.reset = function()
    return finish - now
  end
  view.retry = function(_)
    return finish - now
  end
  view.valid = function(term)
    return math.min(term, finish - now)
  end
  view.grant = function(n)
    granted = granted + n
    return int(n)
  end
  view.record_until = function(_)
    return finish
  end
  view.credit = function(record, unused)
    local credit = math.min(unused, tonumber(record))
    granted = granted - credit
    return credit
  end
  view.save = function()
    redis.call('HSET', state, 'k', kind, 'w', int(index), 'g', int(granted))
    local ms = math.ceil((finish - now) / 1000) + EXPIRY_SLACK_MS
    redis.call('PEXPIRE', state, ms)
    redis.call('PEXPIRE', leases, ms)
  end
elseif kind == 'sliding_counter' then
  local limit, window = p[1], p[2]
  local elapsed = math.fmod(now, window)
  local index = (now - elapsed) / window
  local finish = now - elapsed + window
  local current, previous = 0, 0
  local stored = tonumber(redis.call('HGET', state, 'w'))
  if stored == index then
    current = tonumber(redis.call('HGET', state, 'c')) or 0
    previous = tonumber(redis.call('HGET', state, 'p')) or 0
  elseif stored_kind then
    if stored == index - 1 then
      previous = tonumber(redis.call('HGET', state, 'c')) or 0
    end
    -- A new window: the last one's leases die with it, its count weighs on.
    redis.call('DEL', state, leases)
  end
  -- What the previous window still weighs, in whole permits rounded up.
  local function weight()
    local q, r = mul_div(previous, window - elapsed, window)
    if r > 0 then
      q = q + 1
    end
    return q
  end
  view.available = function()
    return math.max(limit - current - weight(), 0)
  end
  view.reset = function()
    if current > 0 then
      return finish - now + window
    elseif previous > 0 then
      return finish - now
    end
    return 0
  end
  view.retry = function(n)
    if current + n <= limit then
      -- Until the previous window weighs at most what is left for n.
      local allowed = limit - current - n
      if allowed >= previous then
        return 0
      end
      local q = mul_div(allowed, window, previous)
      return math.max(window - q - elapsed, 0)
    end
    -- The next window, where this one's count weighs.
    local allowed = limit - n
    if allowed >= current then
      return finish - now
    end
    local q = mul_div(allowed, window, current)
    return finish - now + window - q
  end
  view.valid = function(term)
    return math.min(term, finish - now)
  end
  view.grant = function(n)
    current = current + n
    return int(n)
  end
  view.record_until = function(_)
    return finish
  end
  view.credit = function(record, unused)
    local credit = math.min(unused, tonumber(record))
    current = current - credit
    return credit
  end
  view.save = function()
    redis.call('HSET', state, 'k', kind, 'w', int(index), 'c', int(current), 'p', int(previous))
    -- The count weighs on through the next window.
    local ms = math.ceil((finish + window - now) / 1000) + EXPIRY_SLACK_MS
    redis.call('PEXPIRE', state, ms)
    redis.call('PEXPIRE', leases, ms)
  end
elseif kind == 'gcra' then
  local interval, tolerance = p[1], p[2]
  local tat = tonumber(redis.call('HGET', state, 't')) or 0
  local returned = tonumber(redis.call('HGET', state, 'r')) or 0
  local function debt()
    return math.max(tat - now, 0)
  end
  view.available = function()
    local left = tolerance - debt()
    if left <= 0 then
      return 0
    end
    return div_floor(left, interval)
  end
  view.reset = debt
  view.retry = function(n)
    return math.max(math.max(tat, now) + n * interval - tolerance - now, 0)
  end
  view.valid = function(term)
    return term
  end
  view.grant = function(n)
    tat = math.max(tat, now) + n * interval
    return int(n) .. ' ' .. int(tat) .. ' ' .. int(returned)
  end
  view.record_until = function(term)
    return now + term + GRACE
  end
  view.credit = function(record, unused)
    local f = {}
    for word in string.gmatch(record, '%S+') do
      f[#f + 1] = tonumber(word)
    end
    if #f ~= 3 then
      return 0
    end
    local held, tat_after, r_grant = f[1], f[2], f[3]
    local floor = tat_after - (returned - r_grant) - now
    local time = math.max(math.min(math.min(unused, held) * interval, floor), 0)
    tat = tat - time
    returned = returned + time
    return div_floor(time, interval)
  end
  view.save = function()
    redis.call('HSET', state, 'k', kind, 't', int(tat), 'r', int(returned))
    local last = redis.call('ZRANGE', leases, -1, -1, 'WITHSCORES')
    local keep = math.max(tat, now)
    if #last == 2 then
      keep = math.max(keep, tonumber(last[2]))
    end
    local ms = math.ceil((keep - now) / 1000) + EXPIRY_SLACK_MS
    redis.call('PEXPIRE', state, ms)
    if #last == 2 then
      redis.call('PEXPIRE', leases, ms)
    end
  end
else
  return redis.error_reply('TOLLGATE_UNKNOWN_KIND ' .. tostring(kind))
end

-- Settles the leases named from ARGV[first] on: credits their unused permits and
-- closes them (a lease is settled once). The permits credited.
local function settle(first)
  local credited = 0
  for i = first, #ARGV - 1, 2 do
    local id = ARGV[i]
    local record = redis.call('HGET', state, 'l:' .. id)
    if record then
      credited = credited + view.credit(record, tonumber(ARGV[i + 1]))
      redis.call('HDEL', state, 'l:' .. id)
      redis.call('ZREM', leases, id)
    end
  end
  return credited
end

if op == 'give_back' then
  local credited = settle(6)
  view.save()
  return credited
end

if op ~= 'take' then
  return redis.error_reply('TOLLGATE_UNKNOWN_OP ' .. tostring(op))
end

local id = ARGV[6]
local need, want, divisor, term = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
-- Two live leases never share an id: the caller draws another.
if redis.call('HEXISTS', state, 'l:' .. id) == 1 then
  return {-1, 0, 0, 0, 0, 0}
end
settle(11)
local available = view.available()
if need > available then
  view.save()
  return {0, 0, 0, available, view.retry(need), view.reset()}
end
local granted = math.min(math.max(need, math.min(want, div_floor(available, divisor))), available)
if granted > 0 then
  redis.call('HSET', state, 'l:' .. id, view.grant(granted))
  redis.call('ZADD', leases, int(view.record_until(term)), id)
end
view.save()
-- Nothing left: when one more permit would be, for the node to hold off until then.
local next = 0
if available == granted then
  next = view.retry(1)
end
return {1, granted, view.valid(term), available - granted, next, view.reset()}
