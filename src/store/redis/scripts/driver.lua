-- The driver: decode the request, run each check, commit all-or-nothing.
--
-- Single mode, one request:
-- KEYS[i]   the key of check i
-- ARGV[1]   "acquire" | "peek" | "reserve" | "refund" (several checks reserve by
--           acquiring: only immediate reservations)
-- ARGV[2]   n
-- ARGV[3]   max_wait µs, for "reserve"
-- ARGV[4]   now µs since the epoch, or "" for the server's TIME
-- ARGV[5..] for each check in order: its kind, its parameter count c, c parameters
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
-- conflict for every other, even one whose state has the same shape.
--
-- Returns five integers per check (see prelude.lua), in batch mode one such list (or
-- error string) per request. One check writes what it decided
-- (a denial that counts attempts changes its state); several write only if all admit.
-- Every write carries a TTL that ends when the state may be forgotten, plus a second
-- of slack (a state past that point decides as a fresh one, so keeping it a little
-- longer changes nothing, while expiring it early would), and a state that may
-- already be forgotten is deleted.

local EXPIRY_SLACK_MS = 1000

local server_now
-- The server's TIME in µs, read once per call.
local function time_now()
  if server_now == nil then
    local time = redis.call('TIME')
    server_now = tonumber(time[1]) * 1000000 + tonumber(time[2])
  end
  return server_now
end

-- Decides one request: its keys are KEYS[first_key .. first_key + key_count - 1],
-- its arguments ARGV[at ..] as single mode's ARGV[1 ..]. Returns the reply, or nil
-- and an error message; raises what it cannot name.
local function decide_request(first_key, key_count, at)
  local op = ARGV[at]
  local n = tonumber(ARGV[at + 1])
  local max_wait = tonumber(ARGV[at + 2])
  local now
  if ARGV[at + 3] ~= '' then
    now = tonumber(ARGV[at + 3])
  else
    now = time_now()
  end

  local checks = {}
  local arg = at + 4
  for i = 1, key_count do
    local key = KEYS[first_key + i - 1]
    local kind = ARGV[arg]
    local count = tonumber(ARGV[arg + 1])
    local p = {}
    for j = 1, count do
      p[j] = tonumber(ARGV[arg + 1 + j])
    end
    arg = arg + 2 + count
    local algorithm = ALGORITHMS[kind]
    if algorithm == nil then
      return nil, 'TOLLGATE_UNKNOWN_RULE ' .. tostring(kind)
    end
    local ok, stored = pcall(redis.call, 'GET', key)
    if not ok then
      return nil, 'TOLLGATE_CONFLICT ' .. key
    end
    if stored == false then
      stored = nil
    elseif string.sub(stored, 1, #kind + 1) == kind .. ':' then
      stored = string.sub(stored, #kind + 2)
    else
      -- Another rule's state, or something tollgate never wrote.
      return nil, 'TOLLGATE_CONFLICT ' .. key
    end
    checks[i] = {algorithm = algorithm, kind = kind, key = key, p = p, stored = stored}
  end

  -- One check's verdict and new state.
  local function decide(check)
    local a = check.algorithm
    -- A state past its expiry decides as a fresh one and is deleted on commit, as the
    -- memory store forgets it: its TTL's slack must change nothing.
    if check.stored ~= nil and a.expires_at(check.p, check.stored) <= now then
      check.stored = nil
      check.stale = true
    end
    if op == 'acquire' then
      return a.acquire(check.p, check.stored, now, n)
    elseif op == 'peek' then
      if a.peek then
        return a.peek(check.p, check.stored, now, n)
      end
      return a.acquire(check.p, check.stored, now, n)
    elseif op == 'reserve' then
      return a.reserve(check.p, check.stored, now, n, max_wait)
    elseif op == 'refund' then
      return refunded(), a.refund(check.p, check.stored, now, n)
    end
    error({err = 'TOLLGATE_UNKNOWN_OP ' .. tostring(op)})
  end

  local all_admit = true
  local reply = {}
  for i, check in ipairs(checks) do
    -- A state this rule cannot read is reported with its key.
    local ok, verdict, new_state = pcall(decide, check)
    if not ok then
      local message = verdict
      if type(verdict) == 'table' then
        message = verdict.err
      end
      if string.find(tostring(message), 'TOLLGATE_CONFLICT', 1, true) then
        return nil, 'TOLLGATE_CONFLICT ' .. check.key
      end
      error(verdict)
    end
    check.new_state = new_state
    if not is_admitted(verdict) then
      all_admit = false
    end
    for j = 1, 5 do
      reply[#reply + 1] = verdict[j]
    end
  end

  if op ~= 'peek' and (#checks == 1 or all_admit) then
    for _, check in ipairs(checks) do
      local state = check.new_state
      if state ~= nil and state ~= check.stored then
        local ttl = check.algorithm.expires_at(check.p, state) - now
        if ttl > 0 then
          redis.call('SET', check.key, check.kind .. ':' .. state, 'PX', int(math.ceil(ttl / 1000) + EXPIRY_SLACK_MS))
        else
          redis.call('DEL', check.key)
        end
      elseif check.stale then
        redis.call('DEL', check.key)
      end
    end
  end

  return reply
end

if ARGV[1] ~= 'batch' then
  local reply, message = decide_request(1, #KEYS, 1)
  if reply == nil then
    return redis.error_reply(message)
  end
  return reply
end

local replies = {}
local first_key = 1
local at = 3
for r = 1, tonumber(ARGV[2]) do
  local key_count = tonumber(ARGV[at])
  -- The end of this request's block: four fields, then per check kind, c, c numbers.
  local next_at = at + 5
  for _ = 1, key_count do
    next_at = next_at + 2 + tonumber(ARGV[next_at + 1])
  end
  local ok, reply, message = pcall(decide_request, first_key, key_count, at + 1)
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
