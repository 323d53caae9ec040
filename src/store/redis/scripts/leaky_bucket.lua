-- Leaky bucket as a meter (src/algorithm/leaky_bucket.rs). It runs on the GCRA above,
-- as its Rust twin runs on a Gcra: p = {interval µs, tolerance µs (interval ×
-- capacity), capacity}; the state is the time the bucket is empty, µs since the epoch.
-- Only a reservation differs: it waits in line for the units ahead of it to drain.

ALGORITHMS.leaky_bucket = {
  acquire = ALGORITHMS.gcra.acquire,

  reserve = function(p, state, now, n, max_wait)
    if n > p[3] then
      return never(p[3])
    end
    if n == 0 then
      return reserved(0)
    end
    local empty_at = gcra_tat(state)
    local wait = math.max(empty_at - now, 0)
    if wait > max_wait then
      -- Both the wait and the lack of room shrink one for one with time.
      local room = math.max(math.max(empty_at, now) + n * p[1] - p[2] - now, 0)
      return gcra_limited(p, empty_at, now, math.max(wait - max_wait, room))
    end
    -- In time, but the bucket may have no room for n yet: the meter's denial.
    local verdict, new_state = ALGORITHMS.gcra.acquire(p, state, now, n)
    if not is_admitted(verdict) then
      return verdict
    end
    return reserved(wait), new_state
  end,

  refund = ALGORITHMS.gcra.refund,

  expires_at = ALGORITHMS.gcra.expires_at,
}
