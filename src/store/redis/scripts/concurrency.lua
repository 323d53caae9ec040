-- concurrency: a concurrency limit whose permits expire (Leased over Concurrency,
-- src/algorithm/leased.rs and concurrency.rs). p = {max, lease µs}; the state is
-- "in_use renewed_at": the permits held and when an acquire or release last renewed
-- their lease, µs since the epoch ("0 0" when none are held).

local function concurrency_fields(state)
  if state == nil then
    return 0, 0
  end
  local f = fields(state)
  if #f ~= 2 or f[1] < 0 or f[1] ~= math.floor(f[1]) or f[2] ~= math.floor(f[2]) then
    conflict()
  end
  return f[1], f[2]
end

-- The permits still held at `now`: none once the lease has run out.
local function concurrency_held(p, state, now)
  local in_use, renewed_at = concurrency_fields(state)
  if in_use > 0 and now >= renewed_at + p[2] then
    return 0
  end
  return in_use
end

local function concurrency_state(in_use, renewed_at)
  if in_use == 0 then
    return '0 0'
  end
  return int(in_use) .. ' ' .. int(renewed_at)
end

-- Acquiring renews the lease of every permit held; a denial renews nothing.
local function concurrency_acquire(p, state, now, n)
  if n > p[1] then
    return never(p[1])
  end
  local in_use = concurrency_held(p, state, now)
  local after = in_use + n
  if after <= p[1] then
    if n == 0 then
      return admitted(p[1], p[1] - after, 0)
    end
    return admitted(p[1], p[1] - after, 0), concurrency_state(after, now)
  end
  if n == 0 then
    -- A peek, even when the maximum was lowered below what is held.
    return admitted(p[1], 0, 0)
  end
  -- Permits return when their holders release them, not with time: a wait of -1
  -- (Retry::OnRelease).
  return limited(-1, p[1], math.max(p[1] - in_use, 0), 0)
end

ALGORITHMS.concurrency = {
  acquire = concurrency_acquire,

  -- Only immediate reservations: waiting for a release is not a matter of time.
  reserve = function(p, state, now, n, _)
    local verdict, new_state = concurrency_acquire(p, state, now, n)
    if verdict[1] == KIND_ADMITTED then
      return reserved(0), new_state
    end
    return verdict
  end,

  -- Releases `n` permits and renews the lease of those still held.
  refund = function(p, state, now, n)
    if state == nil then
      return nil
    end
    return concurrency_state(math.max(concurrency_held(p, state, now) - n, 0), now)
  end,

  expires_at = function(p, state)
    local in_use, renewed_at = concurrency_fields(state)
    if in_use == 0 then
      return 0
    end
    return renewed_at + p[2]
  end,
}
