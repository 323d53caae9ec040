-- refresh_period: Resilience4j's limiter (src/algorithm/refresh_period.rs).
-- p = {refresh period µs, limit per period, capacity (at most 2^52)}; the state is
-- "start active_cycle active_permissions": when cycle 0 began (the key's first use,
-- µs since the epoch), the cycle last brought up to date, and the permits left in it,
-- negative when later cycles are reserved. The Rust side bounds the limit to 2^52 and
-- the deepest debt to 2^53, so where a sum could pass 2^53 (and round) the code below
-- takes a detour that keeps it exact. Only times past 2^53 µs (285 years) round: the
-- retry_after of a denial that would wait that long, with a refresh period of years.

-- floor(a / b) for integers a >= 0, b >= 1. fmod is exact, so a - fmod(a, b) is an
-- exact multiple of b and the quotient is exact, where a plain double quotient may
-- round up to the next integer.
local function refresh_floor_div(a, b)
  return (a - math.fmod(a, b)) / b
end

local function refresh_ceil_div(a, b)
  local q = refresh_floor_div(a, b)
  if math.fmod(a, b) > 0 then
    q = q + 1
  end
  return q
end

local function refresh_fields(state)
  local f = fields(state)
  if #f ~= 3 then
    conflict()
  end
  for i = 1, 3 do
    if f[i] ~= math.floor(f[i]) then
      conflict()
    end
  end
  return {start = f[1], cycle = f[2], permits = f[3]}
end

local function refresh_state(s)
  return int(s.start) .. ' ' .. int(s.cycle) .. ' ' .. int(s.permits)
end

-- The first cycle, from `cycle` on, whose permits reach `target` (at most 2^52).
local function refresh_cycle_reaching(p, cycle, permits, target)
  if permits >= 0 then
    return cycle + refresh_ceil_div(math.max(target - permits, 0), p[2])
  end
  -- ceil((target + debt) / limit), where target + debt may pass 2^53: whole limits
  -- of each, then the remainders, whose sum is below 2 limits.
  local debt = -permits
  local rest = math.fmod(target, p[2]) + math.fmod(debt, p[2])
  local cycles = refresh_floor_div(target, p[2]) + refresh_floor_div(debt, p[2])
  if rest > p[2] then
    cycles = cycles + 2
  elseif rest > 0 then
    cycles = cycles + 1
  end
  return cycle + cycles
end

-- When the permits are back to the full limit: a state from then on decides as a
-- fresh one (the Rust idle_at).
local function refresh_idle_at(p, s)
  return s.start + refresh_cycle_reaching(p, s.cycle, s.permits, p[2]) * p[1]
end

-- The stored state, or a fresh one starting at `now` where there is none (the driver
-- hands a state past its idle_at over as none).
local function refresh_load(p, state, now)
  if state ~= nil then
    return refresh_fields(state)
  end
  return {start = now, cycle = 0, permits = p[2]}
end

-- The state brought up to `now`: entering a cycle tops the permits up by one limit
-- per cycle passed, capped at the limit. A `now` before the active cycle stays in it.
local function refresh_current(p, s, now)
  local elapsed = math.max(now - s.start, 0)
  local cycle = math.max(refresh_floor_div(elapsed, p[1]), s.cycle)
  local permits = s.permits
  if cycle ~= s.cycle then
    -- permits + cycles × limit, capped at the limit. A product beyond 2^53 rounds, but
    -- never across the exact debt it is compared with; below the debt it is exact.
    local below = (cycle - s.cycle - 1) * p[2]
    if permits >= 0 or below >= -permits then
      permits = p[2]
    else
      permits = permits + below + p[2]
    end
  end
  return {elapsed = elapsed, cycle = cycle, permits = permits}
end

-- µs from `current` until the start of `cycle` (zero for the current cycle).
local function refresh_until_cycle(p, current, cycle)
  if cycle > current.cycle then
    return cycle * p[1] - current.elapsed
  end
  return 0
end

local function refresh_wait(p, current, n)
  local cycle = refresh_cycle_reaching(p, current.cycle, current.permits, n)
  return refresh_until_cycle(p, current, cycle)
end

local function refresh_until_full(p, current)
  return refresh_wait(p, current, p[2])
end

-- The most permits a request waiting at most `max_wait` µs can ever get.
local function refresh_most_within(p, max_wait)
  if max_wait == 0 then
    return p[2]
  end
  return (2 + refresh_floor_div(max_wait - 1, p[1])) * p[2]
end

local function refresh_limited(p, current, retry_after)
  return limited(retry_after, p[2], math.max(current.permits, 0), refresh_until_full(p, current))
end

-- Resilience4j's calculateNextState with a timeout of `max_wait`: returns the verdict
-- or nil, then the state after the grant, the current state and the wait.
local function refresh_decide(p, state, now, n, max_wait)
  if n > p[3] then
    return never(p[3])
  end
  local s = refresh_load(p, state, now)
  local current = refresh_current(p, s, now)
  if n == 0 then
    return nil, nil, current, 0
  end
  local wait = refresh_wait(p, current, n)
  if wait > max_wait then
    local most = refresh_most_within(p, max_wait)
    if n > most then
      return never(most)
    end
    return refresh_limited(p, current, wait - max_wait)
  end
  current.permits = current.permits - n
  local after = {start = s.start, cycle = current.cycle, permits = current.permits}
  return nil, refresh_state(after), current, wait
end

ALGORITHMS.refresh_period = {
  acquire = function(p, state, now, n)
    local verdict, new_state, current = refresh_decide(p, state, now, n, 0)
    if verdict ~= nil then
      return verdict
    end
    return admitted(p[2], math.max(current.permits, 0), refresh_until_full(p, current)), new_state
  end,

  reserve = function(p, state, now, n, max_wait)
    local verdict, new_state, _, wait = refresh_decide(p, state, now, n, max_wait)
    if verdict ~= nil then
      return verdict
    end
    return reserved(wait), new_state
  end,

  -- Gives `n` permits back to the current cycle, never above the limit.
  refund = function(p, state, now, n)
    local s = refresh_load(p, state, now)
    local current = refresh_current(p, s, now)
    if current.permits < p[2] then
      local permits = math.min(current.permits + n, p[2])
      return refresh_state({start = s.start, cycle = current.cycle, permits = permits})
    end
    return nil
  end,

  expires_at = function(p, state)
    return refresh_idle_at(p, refresh_fields(state))
  end,
}
