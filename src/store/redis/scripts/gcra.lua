-- GCRA (src/algorithm/gcra.rs). p = {interval µs, tolerance µs (interval × burst),
-- burst}; the state is the theoretical arrival time (TAT), µs since the epoch.
-- A one-key acquire is decided by gcra_fast.lua instead, inline: change both together
-- (tests/redis_gcra.rs holds them to the same decisions).

local function gcra_tat(state)
  if state == nil then
    return 0
  end
  -- One number, as fields() would read it, without a table per read.
  local tat = tonumber(state)
  if tat == nil then
    conflict()
  end
  return tat
end

-- floor((tolerance - ttl) / interval); a double quotient may round up to the next
-- integer, so check it by an exact product.
local function gcra_remaining(p, ttl)
  local left = p[2] - ttl
  if left <= 0 then
    return 0
  end
  local whole = math.floor(left / p[1])
  if whole * p[1] > left then
    whole = whole - 1
  end
  return whole
end

local function gcra_admitted(p, tat, now)
  local ttl = math.max(tat - now, 0)
  return admitted(p[3], gcra_remaining(p, ttl), ttl)
end

local function gcra_limited(p, tat, now, retry)
  local ttl = math.max(tat - now, 0)
  return limited(retry, p[3], gcra_remaining(p, ttl), ttl)
end

ALGORITHMS.gcra = {
  acquire = function(p, state, now, n)
    if n > p[3] then
      return never(p[3])
    end
    local tat = gcra_tat(state)
    if n == 0 then
      return gcra_admitted(p, tat, now)
    end
    local new_tat = math.max(tat, now) + n * p[1]
    local allow_at = new_tat - p[2]
    if allow_at > now then
      return gcra_limited(p, tat, now, allow_at - now)
    end
    return gcra_admitted(p, new_tat, now), int(new_tat), new_tat
  end,

  reserve = function(p, state, now, n, max_wait)
    if n > p[3] then
      return never(p[3])
    end
    if n == 0 then
      return reserved(0)
    end
    local tat = gcra_tat(state)
    local new_tat = math.max(tat, now) + n * p[1]
    local wait = math.max(new_tat - p[2] - now, 0)
    if wait > max_wait then
      return gcra_limited(p, tat, now, wait - max_wait)
    end
    return reserved(wait), int(new_tat)
  end,

  refund = function(p, state, now, n)
    local tat = gcra_tat(state)
    if tat > now then
      return int(math.max(tat - n * p[1], now))
    end
    return nil
  end,

  expires_at = function(p, state)
    return gcra_tat(state)
  end,

  -- The stored value is the TAT negated, "-<TAT>", not "gcra:<TAT>": the inline
  -- acquire (gcra_fast.lua) reads it with one tonumber, as a script storing the bare
  -- TAT would, and its sign still tells its kind: every other kind's value starts
  -- with its name, the one other bare number tollgate writes, a BatchedLimiter's
  -- counter (INCRBY), is never below 0, and a TAT written is always above 0 (µs
  -- since the epoch plus an interval). "gcra:<TAT>", as earlier versions wrote it,
  -- still reads (driver.lua), and is written over in this form at the next change;
  -- an earlier version reads this form as a conflict.
  value_of = function(state)
    return '-' .. state
  end,

  -- A number below 0, down to -2^53, as gcra_fast.lua reads it. The state is the
  -- text after the minus, so that the driver's "state unchanged" compares as
  -- gcra_fast.lua does (the new value against the stored one); a value read as such a
  -- number without a leading minus (spaces before it) is read, and compared, as the
  -- number it is.
  state_of = function(value)
    local negated = tonumber(value)
    if negated and negated < 0 and negated >= -9007199254740992 then
      if string.byte(value) == 45 then
        return string.sub(value, 2)
      end
      return float(-negated)
    end
    return nil
  end,
}
