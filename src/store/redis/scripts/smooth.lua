-- Guava's SmoothBursty and SmoothWarmingUp (src/algorithm/smooth/). Every double is
-- computed by the same operations in the same order as in Rust, and every `as i64` is
-- the same truncation, so the waits match to the microsecond.
--
-- p = {stable interval µs, max permits, capacity} for smooth_bursty, where a stored
-- permit takes one stable interval to cool down and costs nothing; smooth_warming_up
-- adds {threshold permits, slope µs per permit, cool-down µs per permit} (the
-- cool-down is unused, sent as 0, when nothing is ever stored: Rust divides by an
-- infinite cool-down there and stores nothing, as a maximum of 0 does here).
--
-- The state is "stored_permits start next_free": start is the µs since the epoch at
-- which the state was made fresh, next_free the µs after start, as Rust counts them.
-- Counting from start keeps the numbers small and exact, and reproduces Rust's clamp
-- of an earlier `now` to the start. A state is forgotten once its stored permits are
-- back at the maximum, as the Rust `idle_at` says.
--
-- Exact while next_free plus the time to store the maximum stays within 2^53 µs of the
-- start (285 years). Rust's capacity lets one request cost up to 2^53 µs, so a request
-- within a few seconds of that can be answered 1 µs off here: only such requests.

-- One local for the whole file: a Lua function holds at most 200 locals, and the
-- script is one function.
local smooth = {}

-- Rust's `as i64` of a finite double.
function smooth.trunc(x)
  if x >= 0 then
    return math.floor(x)
  end
  return math.ceil(x)
end

smooth.BURSTY = {
  cool_down = function(p)
    return p[1]
  end,
  stored_to_wait = function(p, stored, take)
    return 0
  end,
  initial_stored = function(p)
    return 0
  end,
}

smooth.WARMING_UP = {
  cool_down = function(p)
    return p[6]
  end,
  -- Guava's storedPermitsToWaitTime: the area under the warm-up slope.
  stored_to_wait = function(p, stored, take)
    local above = stored - p[4]
    local micros = 0
    if above > 0 then
      local taken_above = math.min(above, take)
      local length = (p[1] + above * p[5]) + (p[1] + (above - taken_above) * p[5])
      micros = smooth.trunc(taken_above * length / 2)
      take = take - taken_above
    end
    return micros + smooth.trunc(p[1] * take)
  end,
  -- Fully cold.
  initial_stored = function(p)
    return p[2]
  end,
}

function smooth.parse(state)
  local f = fields(state)
  if #f ~= 3 or f[1] < 0 or f[3] < 0 then
    conflict()
  end
  return {stored = f[1], start = f[2], next_free = f[3]}
end

-- The µs since the epoch at which the stored permits are back at the maximum: the Rust
-- `idle_at` (`full_at`), from which the state is forgotten.
function smooth.full_at(shape, p, s)
  local missing = p[2] - s.stored
  local refill = 0
  if missing > 0 then
    refill = math.ceil(missing * shape.cool_down(p))
  end
  return s.start + s.next_free + refill
end

-- The key's state, or a fresh one at `now` if there is none (the driver hands a
-- state past its expiry over as none).
function smooth.state(shape, p, state, now)
  if state ~= nil then
    return smooth.parse(state)
  end
  return {stored = shape.initial_stored(p), start = now, next_free = 0}
end

function smooth.encode(s)
  return float(s.stored) .. ' ' .. int(s.start) .. ' ' .. int(s.next_free)
end

-- Whole µs from the start to `now`, never negative (Rust's micros_at).
function smooth.micros_at(s, now)
  return math.max(now - s.start, 0)
end

-- µs from `now` to `us` after the start, never negative; subtracting the small
-- `now - start` keeps the result exact where `start + us` might not be.
function smooth.time_to(s, now, us)
  return math.max(math.max(us, 0) - (now - s.start), 0)
end

-- Guava's resync: stores the permits of the idle time up to now_us.
function smooth.resync(shape, p, s, now_us)
  if now_us > s.next_free then
    local new_permits = (now_us - s.next_free) / shape.cool_down(p)
    s.stored = math.min(p[2], s.stored + new_permits)
    s.next_free = now_us
  end
end

-- Guava's reserveEarliestAvailable: commits n permits, returns when they may be used.
function smooth.take(shape, p, s, now_us, n)
  smooth.resync(shape, p, s, now_us)
  local granted_at = s.next_free
  local spend = math.min(n, s.stored)
  local fresh = n - spend
  local wait = shape.stored_to_wait(p, s.stored, spend) + smooth.trunc(fresh * p[1])
  s.next_free = s.next_free + wait
  s.stored = s.stored - spend
  return granted_at
end

-- Limit, remaining and µs until the stored permits are back at the maximum.
function smooth.status(shape, p, s, now_us, now)
  local limit = math.max(math.floor(p[2]), 1)
  local remaining = 0
  if s.next_free <= now_us then
    remaining = math.floor(s.stored)
  end
  local missing = p[2] - s.stored
  local refill = 0
  if missing > 0 then
    refill = math.ceil(missing * shape.cool_down(p))
  end
  local full_at = math.max(s.next_free, now_us) + refill
  return limit, remaining, smooth.time_to(s, now, full_at)
end

-- Admitted, with the µs until more than remaining can pass (the Rust admission's
-- next permit): once prepaid time has run out, or once idle time stores the next
-- whole permit.
function smooth.admitted(shape, p, s, now_us, now)
  local limit, remaining, reset_after = smooth.status(shape, p, s, now_us, now)
  local next_permit = 0
  if remaining < limit then
    local next_us = s.next_free
    if next_us > now_us then
      next_permit = smooth.time_to(s, now, next_us)
    elseif shape.cool_down(p) == 0 then
      -- Nothing is ever stored (Rust's infinite cool-down): no sooner than the reset.
      next_permit = reset_after
    else
      local missing = math.max(math.floor(s.stored) + 1 - s.stored, 0)
      next_permit = smooth.time_to(s, now, now_us + math.ceil(missing * shape.cool_down(p)))
    end
  end
  return admitted(limit, remaining, reset_after, next_permit)
end

-- Denied until fits_at µs after the start.
function smooth.limited(shape, p, s, now_us, now, fits_at)
  local limit, _, reset_after = smooth.status(shape, p, s, now_us, now)
  return limited(smooth.time_to(s, now, fits_at), limit, 0, reset_after)
end

function smooth.algorithm(shape)
  return {
    acquire = function(p, state, now, n)
      if n > p[3] then
        return never(p[3])
      end
      local s = smooth.state(shape, p, state, now)
      local now_us = smooth.micros_at(s, now)
      if n == 0 then
        smooth.resync(shape, p, s, now_us)
        return smooth.admitted(shape, p, s, now_us, now)
      end
      if s.next_free > now_us then
        return smooth.limited(shape, p, s, now_us, now, s.next_free)
      end
      smooth.take(shape, p, s, now_us, n)
      return smooth.admitted(shape, p, s, now_us, now), smooth.encode(s)
    end,

    -- Guava's tryAcquire(n, timeout); max_wait is already whole µs.
    reserve = function(p, state, now, n, max_wait)
      if n > p[3] then
        return never(p[3])
      end
      if n == 0 then
        return reserved(0)
      end
      local s = smooth.state(shape, p, state, now)
      local now_us = smooth.micros_at(s, now)
      local fits_at = s.next_free - max_wait
      if fits_at > now_us then
        return smooth.limited(shape, p, s, now_us, now, fits_at)
      end
      local granted_at = smooth.take(shape, p, s, now_us, n)
      return reserved(smooth.time_to(s, now, granted_at)), smooth.encode(s)
    end,

    -- Moves next_free earlier by the cost of n fresh permits, never before now.
    refund = function(p, state, now, n)
      local s = smooth.state(shape, p, state, now)
      local now_us = smooth.micros_at(s, now)
      if s.next_free > now_us then
        local cost = smooth.trunc(n * p[1])
        s.next_free = math.max(s.next_free - cost, now_us)
        return smooth.encode(s)
      end
      return nil
    end,

    expires_at = function(p, state)
      return smooth.full_at(shape, p, smooth.parse(state))
    end,
  }
end

ALGORITHMS.smooth_bursty = smooth.algorithm(smooth.BURSTY)
ALGORITHMS.smooth_warming_up = smooth.algorithm(smooth.WARMING_UP)
