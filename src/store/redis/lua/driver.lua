-- The driver: decode the request, run each check, commit all-or-nothing.
--
-- KEYS[i]   the key of check i
-- ARGV[1]   "acquire" | "peek" | "reserve" | "refund" (several checks reserve by
--           acquiring: only immediate reservations)
-- ARGV[2]   n
-- ARGV[3]   max_wait µs, for "reserve"
-- ARGV[4]   now µs since the epoch, or "" for the server's TIME
-- ARGV[5..] for each check in order: its kind, its parameter count c, c parameters
--
-- A key's value is "<kind>:<state>", so that a key written by one kind of rule is a
-- conflict for every other, even one whose state has the same shape.
--
-- Returns five integers per check (see prelude.lua). One check writes what it decided
-- (a denial that counts attempts changes its state); several write only if all admit.
-- Every write carries a TTL that ends when the state may be forgotten, plus a second
-- of slack (a state past that point decides as a fresh one, so keeping it a little
-- longer changes nothing, while expiring it early would), and a state that may
-- already be forgotten is deleted.

local EXPIRY_SLACK_MS = 1000

local op = ARGV[1]
local n = tonumber(ARGV[2])
local max_wait = tonumber(ARGV[3])
local now
if ARGV[4] ~= '' then
  now = tonumber(ARGV[4])
else
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
end

local checks = {}
local at = 5
for i = 1, #KEYS do
  local kind = ARGV[at]
  local count = tonumber(ARGV[at + 1])
  local p = {}
  for j = 1, count do
    p[j] = tonumber(ARGV[at + 1 + j])
  end
  at = at + 2 + count
  local algorithm = ALGORITHMS[kind]
  if algorithm == nil then
    return redis.error_reply('TOLLGATE_UNKNOWN_RULE ' .. tostring(kind))
  end
  local ok, stored = pcall(redis.call, 'GET', KEYS[i])
  if not ok then
    return redis.error_reply('TOLLGATE_CONFLICT ' .. KEYS[i])
  end
  if stored == false then
    stored = nil
  elseif string.sub(stored, 1, #kind + 1) == kind .. ':' then
    stored = string.sub(stored, #kind + 2)
  else
    -- Another rule's state, or something tollgate never wrote.
    return redis.error_reply('TOLLGATE_CONFLICT ' .. KEYS[i])
  end
  checks[i] = {algorithm = algorithm, kind = kind, p = p, stored = stored}
end

-- One check's verdict and new state.
local function decide(check)
  local a = check.algorithm
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
      return redis.error_reply('TOLLGATE_CONFLICT ' .. KEYS[i])
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
  for i, check in ipairs(checks) do
    local state = check.new_state
    if state ~= nil and state ~= check.stored then
      local ttl = check.algorithm.expires_at(check.p, state) - now
      if ttl > 0 then
        redis.call('SET', KEYS[i], check.kind .. ':' .. state, 'PX', int(math.ceil(ttl / 1000) + EXPIRY_SLACK_MS))
      else
        redis.call('DEL', KEYS[i])
      end
    end
  end
end

return reply
