-- Sliding window counter (src/algorithm/sliding_counter.rs). p = {limit, window µs};
-- the state is "index current previous": the window, counted in windows from the Unix
-- epoch, and the permits taken in it and in the one before.
--
-- The Rust twin compares permit-nanoseconds in u128; products of a count and the
-- window may pass 2^53 here, so they go through sliding_counter_mul_div, exact.
-- Admissions, remaining and reset_after equal the Rust ones (the comparisons scale
-- from ns to µs). retry_after is the earliest whole µs at which the request fits: the
-- Rust one rounded up to the µs, the same whenever that is a whole µs.

-- floor(a × b / c) and the remainder, exact for integers a, b < 2^53 and
-- 0 < c <= 2^52 whose quotient is below 2^53.
local function sliding_counter_mul_div(a, b, c)
  local product = a * b
  if product < 9007199254740992 then
    local r = math.fmod(product, c)
    return (product - r) / c, r
  end
  -- Long multiplication by b's bits, keeping q × c + r equal to the product so far
  -- (r < c <= 2^52, so 2r and r + a % c stay exact).
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

local function sliding_counter_decode(state)
  if state == nil then
    return {index = 0, current = 0, previous = 0}
  end
  local f = fields(state)
  if #f ~= 3 then
    conflict()
  end
  for i = 1, 3 do
    -- Written so that NaN and infinities fail too.
    if not (f[i] >= 0 and f[i] <= 4503599627370496 and f[i] % 1 == 0) then
      conflict()
    end
  end
  return {index = f[1], current = f[2], previous = f[3]}
end

local function sliding_counter_encode(s)
  return int(s.index) .. ' ' .. int(s.current) .. ' ' .. int(s.previous)
end

-- The state rolled forward to `now`'s window, the µs since that window began, and
-- the time the decision is made at: `now`, or the start of a window that a request
-- with a later clock reading already moved to.
local function sliding_counter_roll(p, s, now)
  local elapsed = math.fmod(now, p[2])
  local index = (now - elapsed) / p[2]
  if index < s.index then
    return {index = s.index, current = s.current, previous = s.previous}, 0, s.index * p[2]
  end
  local rolled = {index = index, current = 0, previous = 0}
  if index == s.index then
    rolled.current, rolled.previous = s.current, s.previous
  elseif index == s.index + 1 then
    rolled.previous = s.current
  end
  return rolled, elapsed, now
end

-- What the previous window still weighs, in whole permits rounded up:
-- ceil(previous × (W - elapsed) / W). The estimate admits n when
-- current + n + this <= limit, the Rust comparison divided by W.
local function sliding_counter_weight(p, s, elapsed)
  if s.previous == 0 then
    return 0
  end
  local q, r = sliding_counter_mul_div(s.previous, p[2] - elapsed, p[2])
  if r > 0 then
    q = q + 1
  end
  return q
end

local function sliding_counter_expires_at(p, s)
  if s.current > 0 then
    return (s.index + 2) * p[2]
  elseif s.previous > 0 then
    return (s.index + 1) * p[2]
  end
  return 0
end

-- The earliest whole µs from which n fit, if nothing else is taken.
local function sliding_counter_allowed_at(p, s, at, n)
  local limit, window = p[1], p[2]
  local next_start = (s.index + 1) * window
  -- In this window: previous × (W - e) <= spare × W, from e = W - floor(spare × W /
  -- previous), which lies in this window when spare < previous.
  local spare = limit - s.current - n
  if spare >= 0 and s.previous > spare then
    local span = sliding_counter_mul_div(spare, window, s.previous)
    return math.max(next_start - span, at)
  end
  -- In the next one, where the current count becomes the previous one:
  -- current × (W - e) <= (limit - n) × W.
  if s.current == 0 or limit - n >= s.current then
    return next_start
  end
  local span = sliding_counter_mul_div(limit - n, window, s.current)
  return next_start + window - span
end

local function sliding_counter_verdict(p, s, elapsed, now)
  local remaining = math.max(p[1] - s.current - sliding_counter_weight(p, s, elapsed), 0)
  local reset_after = math.max(sliding_counter_expires_at(p, s) - now, 0)
  return remaining, reset_after
end

-- Admitted, with the µs until one more than remaining fits (as the Rust twin's
-- admission tells it: the reset overstates it by up to a window).
local function sliding_counter_admitted(p, s, elapsed, now, at)
  local remaining, reset_after = sliding_counter_verdict(p, s, elapsed, now)
  local next_permit = 0
  if remaining < p[1] then
    next_permit = math.max(sliding_counter_allowed_at(p, s, at, remaining + 1) - now, 0)
  end
  return admitted(p[1], remaining, reset_after, next_permit)
end

local function sliding_counter_acquire(p, state, now, n)
  if n > p[1] then
    return never(p[1])
  end
  local stored = sliding_counter_decode(state)
  local s, elapsed, at = sliding_counter_roll(p, stored, now)
  -- A call that changes nothing deletes a state idle at `now`, as the memory store
  -- forgets it then (a request reading the clock earlier would see it again). Rolled
  -- to `now`, an idle state holds no counts, so it expires at once.
  local unchanged = nil
  if state ~= nil and sliding_counter_expires_at(p, stored) <= now then
    unchanged = sliding_counter_encode(s)
  end
  if s.current + n + sliding_counter_weight(p, s, elapsed) > p[1] then
    if n == 0 then
      return sliding_counter_admitted(p, s, elapsed, now, at), unchanged
    end
    local remaining, reset_after = sliding_counter_verdict(p, s, elapsed, now)
    local retry = math.max(sliding_counter_allowed_at(p, s, at, n) - now, 0)
    return limited(retry, p[1], remaining, reset_after)
  end
  local new_state = unchanged
  if n > 0 then
    s.current = s.current + n
    new_state = sliding_counter_encode(s)
  end
  return sliding_counter_admitted(p, s, elapsed, now, at), new_state
end

ALGORITHMS.sliding_counter = {
  acquire = sliding_counter_acquire,

  -- Immediate only, as the Rust twin: admitted now, or acquire's denial.
  reserve = function(p, state, now, n, max_wait)
    local verdict, new_state = sliding_counter_acquire(p, state, now, n)
    if is_admitted(verdict) then
      return reserved(0), new_state
    end
    return verdict
  end,

  -- Lowers the current window's count, never below zero.
  refund = function(p, state, now, n)
    local s = sliding_counter_roll(p, sliding_counter_decode(state), now)
    s.current = math.max(s.current - n, 0)
    return sliding_counter_encode(s)
  end,

  expires_at = function(p, state)
    return sliding_counter_expires_at(p, sliding_counter_decode(state))
  end,
}
