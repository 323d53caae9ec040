-- Sliding log (src/algorithm/sliding_log.rs). p = {limit, window µs, min_gap µs,
-- count_blocked (1 or 0)}. The state is the log, oldest first, in runs of equal
-- timestamps: "t1 c1 d2 c2 d3 c3 ..." with t1 the oldest timestamp (µs since the
-- epoch), each d the step from the previous run's timestamp and each c the entries
-- at it. A request's n permits share one timestamp, so a run costs two short fields.

-- The most entries a log can hold: twice the largest limit the Rust side sends
-- (src/algorithm/sliding_log.rs). Past it a state is not one this rule wrote.
local SLIDING_LOG_MAX_ENTRIES = 2000

-- The log as a list of timestamps, oldest first, and whether a stored state was
-- forgotten: one idle at `now` decides as a fresh one, and the memory store forgets
-- it then, so start afresh as it does.
local function sliding_log_decode(p, state, now)
  local log = {}
  if state == nil then
    return log, false
  end
  local f = fields(state)
  if #f % 2 ~= 0 then
    conflict()
  end
  local t, len = 0, 0
  for i = 1, #f, 2 do
    local step, count = f[i], f[i + 1]
    t = t + step
    -- Written so that NaN and infinities fail too.
    if not (step >= 0 and (step >= 1 or i == 1) and step % 1 == 0 and t < 9007199254740992
        and count >= 1 and count % 1 == 0 and len + count <= SLIDING_LOG_MAX_ENTRIES) then
      conflict()
    end
    for _ = 1, count do
      len = len + 1
      log[len] = t
    end
  end
  if len > 0 and log[len] + math.max(p[2], p[3]) <= now then
    return {}, true
  end
  return log, false
end

-- The new state when a call changes nothing: a forgotten state is deleted, as the
-- memory store deletes it (a request reading the clock earlier would see it again).
local function sliding_log_unchanged(forgotten)
  if forgotten then
    return ''
  end
  return nil
end

local function sliding_log_encode(log)
  local parts, previous, i, len = {}, 0, 1, #log
  while i <= len do
    local t, count = log[i], 0
    while i <= len and log[i] == t do
      count = count + 1
      i = i + 1
    end
    parts[#parts + 1] = int(t - previous)
    parts[#parts + 1] = int(count)
    previous = t
  end
  return table.concat(parts, ' ')
end

-- Entries still in the window at `now` (later ones included): the log is sorted, so
-- the expired ones lead.
local function sliding_log_active(p, log, now)
  local expired, len = 0, #log
  while expired < len and log[expired + 1] + p[2] <= now do
    expired = expired + 1
  end
  return len - expired
end

-- The earliest time from `now` at which `n` (at least 1) fit: at most limit - n
-- entries may remain, so the one before them must expire; and the gap must have run.
local function sliding_log_allowed_at(p, log, now, n)
  local at, len = now, #log
  local keep = math.max(p[1] - n, 0)
  if len >= keep + 1 then
    at = math.max(at, log[len - keep] + p[2])
  end
  if p[3] > 0 and len > 0 then
    at = math.max(at, log[len] + p[3])
  end
  return at
end

local function sliding_log_remaining(p, active, newest, now)
  if newest ~= nil and p[3] > 0 and newest + p[3] > now then
    return 0
  end
  return math.max(p[1] - active, 0)
end

local function sliding_log_reset_after(p, newest, now)
  if newest == nil then
    return 0
  end
  return math.max(newest + math.max(p[2], p[3]) - now, 0)
end

-- The decision as if `n` were taken at `now`, which they may be.
local function sliding_log_admitted(p, log, now, n)
  local newest = log[#log]
  if n > 0 then
    newest = math.max(newest or now, now)
  end
  local active = sliding_log_active(p, log, now) + n
  return admitted(p[1], sliding_log_remaining(p, active, newest, now),
    sliding_log_reset_after(p, newest, now))
end

local function sliding_log_limited(p, log, now, retry)
  local newest = log[#log]
  return limited(retry, p[1], sliding_log_remaining(p, sliding_log_active(p, log, now), newest, now),
    sliding_log_reset_after(p, newest, now))
end

-- The log with `n` entries at `at`, after dropping expired entries beyond the newest
-- `limit`; past 2 × limit entries the oldest go (only blocked attempts get there).
local function sliding_log_record(p, log, now, at, n)
  local len, first = #log, 1
  while len - first + 1 > p[1] and log[first] + p[2] <= now do
    first = first + 1
  end
  local keep = math.max(len - first + 1, 2 * p[1])
  local merged, i = {}, first
  while i <= len and log[i] <= at do
    merged[#merged + 1] = log[i]
    i = i + 1
  end
  for _ = 1, n do
    merged[#merged + 1] = at
  end
  while i <= len do
    merged[#merged + 1] = log[i]
    i = i + 1
  end
  local excess = #merged - keep
  if excess <= 0 then
    return merged
  end
  local out = {}
  for j = excess + 1, #merged do
    out[#out + 1] = merged[j]
  end
  return out
end

ALGORITHMS.sliding_log = {
  acquire = function(p, state, now, n)
    if n > p[1] then
      return never(p[1])
    end
    local log, forgotten = sliding_log_decode(p, state, now)
    if n == 0 then
      return sliding_log_admitted(p, log, now, 0), sliding_log_unchanged(forgotten)
    end
    local at = sliding_log_allowed_at(p, log, now, n)
    if at > now then
      if p[4] == 0 then
        return sliding_log_limited(p, log, now, at - now)
      end
      -- The attempt itself now holds the window: the retry moves on.
      log = sliding_log_record(p, log, now, now, n)
      local retry = math.max(sliding_log_allowed_at(p, log, now, n) - now, 0)
      return sliding_log_limited(p, log, now, retry), sliding_log_encode(log)
    end
    local verdict = sliding_log_admitted(p, log, now, n)
    return verdict, sliding_log_encode(sliding_log_record(p, log, now, now, n))
  end,

  peek = function(p, state, now, n)
    if n > p[1] then
      return never(p[1])
    end
    local log = sliding_log_decode(p, state, now)
    if n == 0 then
      return sliding_log_admitted(p, log, now, 0)
    end
    local at = sliding_log_allowed_at(p, log, now, n)
    if at > now then
      return sliding_log_limited(p, log, now, at - now)
    end
    return sliding_log_admitted(p, log, now, n)
  end,

  reserve = function(p, state, now, n, max_wait)
    if n > p[1] then
      return never(p[1])
    end
    local log, forgotten = sliding_log_decode(p, state, now)
    if n == 0 then
      return reserved(0), sliding_log_unchanged(forgotten)
    end
    local at = sliding_log_allowed_at(p, log, now, n)
    local wait = at - now
    local retry = math.max(wait - max_wait, 0)
    -- Room in the log: at most 2 × limit - n entries may remain unexpired.
    local active = sliding_log_active(p, log, now)
    local room = 2 * p[1] - n
    if active > room then
      retry = math.max(retry, log[#log - room] + p[2] - now)
    end
    if wait > max_wait or active > room then
      return sliding_log_limited(p, log, now, retry)
    end
    return reserved(wait), sliding_log_encode(sliding_log_record(p, log, now, at, n))
  end,

  -- Removes the n newest entries.
  refund = function(p, state, now, n)
    local log = sliding_log_decode(p, state, now)
    for i = #log, math.max(#log - n, 0) + 1, -1 do
      log[i] = nil
    end
    return sliding_log_encode(log)
  end,

  -- Decoded in full, so that a malformed state is a conflict even once it would expire.
  expires_at = function(p, state)
    local log = sliding_log_decode(p, state, -math.huge)
    if #log == 0 then
      return 0
    end
    return log[#log] + math.max(p[2], p[3])
  end,
}
