-- tollgate: every rule of one request, decided in one atomic call.
--
-- This script is the concatenation of prelude.lua, the Lua files of the algorithms
-- that the request's rules use (each in a block of its own) and driver.lua, assembled
-- by src/store/redis/script.rs from the registry in src/store/rule.rs; a script with
-- GCRA starts with gcra_fast.lua, which decides a one-key GCRA acquire before any of
-- this is defined. The library of Redis Functions is the same files, every
-- algorithm's, defined once when it is loaded. Each algorithm
-- file registers itself in ALGORITHMS under its kind (everything is local: Redis
-- forbids scripts to create globals) and is the same state machine as its Rust twin
-- in src/algorithm/, which names the file, in microseconds: Lua
-- numbers are doubles, exact only below 2^53, and nanoseconds since the epoch are not.
--
-- An algorithm is a table of functions. Arguments:
--   p      the rule's parameters: a list of numbers, as the Rust side sent them
--   state  the key's stored value (a string), or nil for a fresh key
--   now    µs since the Unix epoch
--
--   acquire(p, state, now, n)            -> verdict, new_state[, its expires_at]
--   peek(p, state, now, n)               -> verdict          (optional; else acquire's)
--   reserve(p, state, now, n, max_wait)  -> verdict, new_state
--   refund(p, state, now, n)             -> new_state
--   expires_at(p, state)                 -> µs since the epoch from which `state` may be
--                                           forgotten (a fresh state decides the same)
--
-- new_state is a string, or nil when nothing changed. An acquire may also return
-- expires_at(p, new_state), saving the driver from reading the state back. A verdict is a list of five
-- integers {kind, limit, remaining, reset_after µs, wait µs}, built by the helpers
-- below; a limited verdict's wait is -1 when it waits for a release, not for time.
-- An admission's fifth integer is the µs until more than `remaining` are free, for
-- the algorithms whose remaining and reset do not tell it (the sliding counter,
-- Guava's; the Rust side reads it for those kinds only), else 0.

local ALGORITHMS = {}

local KIND_LIMITED, KIND_ADMITTED, KIND_RESERVED, KIND_NEVER, KIND_REFUNDED = 0, 1, 2, 3, 4

local function admitted(limit, remaining, reset_after, next_permit)
  return {KIND_ADMITTED, limit, remaining, reset_after, next_permit or 0}
end

local function limited(retry_after, limit, remaining, reset_after)
  return {KIND_LIMITED, limit, remaining, reset_after, retry_after}
end

-- A reservation of the permits asked for, usable after `wait` µs.
local function reserved(wait)
  return {KIND_RESERVED, 0, 0, 0, wait}
end

-- More than `capacity` can ever be granted.
local function never(capacity)
  return {KIND_NEVER, capacity, 0, 0, 0}
end

local function refunded()
  return {KIND_REFUNDED, 0, 0, 0, 0}
end

local function is_admitted(verdict)
  return verdict[1] == KIND_ADMITTED or verdict[1] == KIND_RESERVED or verdict[1] == KIND_REFUNDED
end

-- An integer as a string, exact below 2^53 (tostring would switch to exponents).
local function int(x)
  return string.format('%.0f', x)
end

-- A double as a string that reads back as the same double.
local function float(x)
  return string.format('%.17g', x)
end

-- The key holds something this rule never wrote.
local function conflict()
  error({err = 'TOLLGATE_CONFLICT the key holds the state of another kind of rule'})
end

-- The numbers of a stored state written as space-separated fields.
local function fields(state)
  local out = {}
  for field in string.gmatch(state, '%S+') do
    local value = tonumber(field)
    if value == nil then
      conflict()
    end
    out[#out + 1] = value
  end
  return out
end
