-- The driver: decode the request, run each check, commit all-or-nothing.
--
-- Single mode, one request:
-- KEYS[i]   the key of check i
-- ARGV[1]   "acquire" | "peek" | "reserve" | "refund" (several checks reserve by
--           acquiring: only immediate reservations)
-- ARGV[2]   n
-- ARGV[3]   max_wait µs, for "reserve"
-- ARGV[4]   now µs since the epoch, or "" for the server's TIME
-- ARGV[5..] for each check in order: its kind, its parameter count c, c parameters;
--           a check asked its own count instead of n has "#<count>" before its kind
--
-- Batch mode, several requests decided in order, each as single mode decides it:
-- ARGV[1]   "batch"
-- ARGV[2]   the request count r
-- ARGV[3..] for each request: its key count k, then its ARGV block of single mode
-- KEYS      every request's keys, in order
-- All requests without a time of their own share one reading of TIME. A request that
-- fails (a conflict, an unknown rule) writes nothing and does not fail the others:
-- its reply is the error as a string instead of a list of integers.
--
-- A key's value is "<kind>:<state>", so that a key written by one kind of rule is a
-- conflict for every other, even one whose state has the same shape. A kind may
-- store its state in a form of its own instead, which no "<kind>:…" value and no
-- other writer's value can take (GCRA: its TAT negated, see gcra.lua), by two
-- functions besides those of prelude.lua:
--   value_of(state)   -> the value stored for `state`
--   state_of(value)   -> the state of a stored value, or nil when it is not this kind's
-- Its "<kind>:<state>" values, as earlier versions wrote them, still read.
--
-- Returns five integers per check (see prelude.lua), in batch mode one such list (or
-- error string) per request. One check writes what it decided
-- (a denial that counts attempts changes its state); several write only if all admit.
-- Every write carries a TTL that ends when the state may be forgotten, plus a second
-- of slack (a state past that point decides as a fresh one, so keeping it a little
-- longer changes nothing, while expiring it early would), and a state that may
-- already be forgotten is deleted.
--
-- Everything is passed `keys` and `argv` (KEYS and ARGV) rather than reading the
-- globals, which a Redis Function does not have: the library registers `run` itself,
-- and a script ends with `return run(KEYS, ARGV)`. Redis runs all of a script on
-- every call (a library's definitions only when it is loaded), so it is written to
-- allocate little: no closure per request, one table per check only when a request
-- has several.

local EXPIRY_SLACK_MS = 1000

-- A library's locals outlive the call: `run` clears this one first.
local server_now
-- The server's TIME in µs, read once per call.
local function time_now()
  if server_now == nil then
    local time = redis.call('TIME')
    server_now = tonumber(time[1]) * 1000000 + tonumber(time[2])
  end
  return server_now
end

-- A count as the Rust side writes it: one digit, most often, read without strtod
-- (which costs more than the rest of a small decision).
local function count_of(text)
  if #text == 1 then
    local digit = string.byte(text) - 48
    if digit >= 0 and digit <= 9 then
      return digit
    end
  end
  return tonumber(text)
end

-- One check's verdict, new state and that state's expiry (when the algorithm knows it
-- without reading the state back), then the stored state as decided on and whether
-- it was stale: one past its expiry decides as a fresh one and is deleted on commit,
-- as the memory store forgets it, so that its TTL's slack changes nothing.
local function decide(a, op, p, stored, now, n, max_wait)
  local stale = false
  if stored ~= nil and a.expires_at(p, stored) <= now then
    stored, stale = nil, true
  end
  local verdict, new_state, expires_at
  if op == 'acquire' then
    verdict, new_state, expires_at = a.acquire(p, stored, now, n)
  elseif op == 'peek' then
    if a.peek then
      verdict = a.peek(p, stored, now, n)
    else
      verdict = a.acquire(p, stored, now, n)
    end
  elseif op == 'reserve' then
    verdict, new_state = a.reserve(p, stored, now, n, max_wait)
  elseif op == 'refund' then
    verdict, new_state = refunded(), a.refund(p, stored, now, n)
  else
    error({err = 'TOLLGATE_UNKNOWN_OP ' .. tostring(op)})
  end
  return verdict, new_state, expires_at, stored, stale
end

-- Writes a check's new state with its TTL, or deletes a state that may be forgotten.
local function commit(a, key, kind, p, stored, stale, state, expires_at, now)
  if state ~= nil and state ~= stored then
    local ttl = (expires_at or a.expires_at(p, state)) - now
    if ttl > 0 then
      -- As text: how Redis writes a number argument varies by version (some use
      -- exponents, which PX refuses).
      local value
      if a.value_of then
        value = a.value_of(state)
      else
        value = kind .. ':' .. state
      end
      redis.call('SET', key, value, 'PX', int(math.ceil(ttl / 1000) + EXPIRY_SLACK_MS))
    else
      redis.call('DEL', key)
    end
  elseif stale then
    redis.call('DEL', key)
  end
end

-- Decides one request: its keys are keys[first_key .. first_key + key_count - 1],
-- its arguments argv[at ..] as single mode's ARGV[1 ..]. Returns the reply, or nil
-- and an error message; raises what it cannot name.
local function decide_request(keys, argv, first_key, key_count, at)
  local op = argv[at]
  local n = count_of(argv[at + 1])
  local max_wait = 0
  if op == 'reserve' then
    max_wait = tonumber(argv[at + 2])
  end
  local now = argv[at + 3]
  if now == '' then
    now = time_now()
  else
    now = tonumber(now)
  end

  -- With several checks: the verdicts in a row, and what each would write.
  local reply, pending, all_admit
  if key_count ~= 1 then
    reply, pending, all_admit = {}, {}, true
  end
  local arg = at + 4
  for i = 1, key_count do
    local key = keys[first_key + i - 1]
    local kind = argv[arg]
    -- '#': the check's own count, instead of n.
    local own = n
    if string.byte(kind, 1) == 35 then
      own = count_of(string.sub(kind, 2))
      arg = arg + 1
      kind = argv[arg]
    end
    local count = count_of(argv[arg + 1])
    local p = {}
    for j = 1, count do
      p[j] = tonumber(argv[arg + 1 + j])
    end
    arg = arg + 2 + count
    local a = ALGORITHMS[kind]
    if a == nil then
      return nil, 'TOLLGATE_UNKNOWN_RULE ' .. tostring(kind)
    end
    local stored = redis.pcall('GET', key)
    if stored == false then
      stored = nil
    elseif type(stored) == 'string' and string.byte(stored, #kind + 1) == 58
        and string.find(stored, kind, 1, true) == 1 then
      -- (`find` rather than comparing a prefix cut out: one string fewer per check.)
      stored = string.sub(stored, #kind + 2)
    else
      -- The kind's own form, if it has one; else another rule's state, something
      -- tollgate never wrote, or not a string.
      local state = a.state_of and type(stored) == 'string' and a.state_of(stored)
      if not state then
        return nil, 'TOLLGATE_CONFLICT ' .. key
      end
      stored = state
    end

    -- A state this rule cannot read is reported with its key.
    local ok, verdict, new_state, expires_at, stale
    ok, verdict, new_state, expires_at, stored, stale =
      pcall(decide, a, op, p, stored, now, own, max_wait)
    if not ok then
      local message = verdict
      if type(verdict) == 'table' then
        message = verdict.err
      end
      if string.find(tostring(message), 'TOLLGATE_CONFLICT', 1, true) then
        return nil, 'TOLLGATE_CONFLICT ' .. key
      end
      error(verdict)
    end

    if key_count == 1 then
      if op ~= 'peek' then
        commit(a, key, kind, p, stored, stale, new_state, expires_at, now)
      end
      return verdict
    end
    if not is_admitted(verdict) then
      all_admit = false
    end
    local r = #reply
    for j = 1, 5 do
      reply[r + j] = verdict[j]
    end
    pending[i] = {a, key, kind, p, stored, stale, new_state, expires_at}
  end

  if op ~= 'peek' and all_admit then
    for i = 1, key_count do
      local c = pending[i]
      commit(c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], now)
    end
  end
  return reply or {}
end

-- Decides one call, in single or batch mode.
local function run(keys, argv)
  server_now = nil
  if argv[1] ~= 'batch' then
    local reply, message = decide_request(keys, argv, 1, #keys, 1)
    if reply == nil then
      return redis.error_reply(message)
    end
    return reply
  end

  local replies = {}
  local first_key = 1
  local at = 3
  for r = 1, tonumber(argv[2]) do
    local key_count = tonumber(argv[at])
    -- The end of this request's block: four fields, then per check [#count,] kind, c,
    -- c numbers.
    local next_at = at + 5
    for _ = 1, key_count do
      if string.byte(argv[next_at], 1) == 35 then
        next_at = next_at + 1
      end
      next_at = next_at + 2 + tonumber(argv[next_at + 1])
    end
    local ok, reply, message = pcall(decide_request, keys, argv, first_key, key_count, at + 1)
    if not ok then
      -- An error the request could not name: its text, for this request only.
      if type(reply) == 'table' then
        message = reply.err
      else
        message = reply
      end
      reply = nil
    end
    if reply == nil then
      replies[r] = tostring(message)
    else
      replies[r] = reply
    end
    first_key = first_key + key_count
    at = next_at
  end
  return replies
end
