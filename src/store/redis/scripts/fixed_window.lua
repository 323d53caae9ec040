-- Fixed windows (src/algorithm/fixed_window.rs), in µs.
--
--   fixed_window            p = {limit, window µs, offset µs[, 1]}: window i runs from
--                           i × window − offset; the state is "index count", the index
--                           of the last booked window and the permits booked in it.
--   fixed_window_first_hit  p = {limit, window µs[, 1]}: a window opens at the first
--                           request after the previous one ended; the state is "start
--                           count", the start of the last booked window (µs since the
--                           epoch).
--
-- A last parameter of 1 makes denied acquires count (FixedWindow::counting_denied): one
-- that does not fit in the current window marks it over its limit (count limit + 1),
-- and every acquire in it is then denied, even of 0 permits.
--
-- Windows between the current one and the last booked one are closed: each was filled,
-- or skipped by a reservation that did not fit in it. Both read a state as a booking:
-- {start, finish, ahead (windows from the current one to it), count}.
--
-- The Rust aligned window's last window (the one that runs to the end of a u64 of
-- nanoseconds, in 2554) lies beyond any time the script counts exactly.

-- Helpers in one table: the script is one chunk, and a chunk holds at most 200 locals.
local fixed_window = {}

-- floor(a / b) for integers 0 <= a and 1 <= b, a + b below 2^53. The double quotient
-- is within one of the truth, so it is checked by exact products.
function fixed_window.div_floor(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

-- The two whole numbers of a state; a fresh key books nothing.
function fixed_window.read(state)
  if state == nil then
    return 0, 0
  end
  local f = fields(state)
  if #f ~= 2 then
    conflict()
  end
  for i = 1, 2 do
    if f[i] < 0 or f[i] % 1 ~= 0 then
      conflict()
    end
  end
  return f[1], f[2]
end

function fixed_window.write(first, count)
  if count == 0 then
    return '0 0'
  end
  return int(first) .. ' ' .. int(count)
end

function fixed_window.remaining(p, booked)
  if booked.ahead > 0 then
    return 0
  end
  return math.max(p[1] - booked.count, 0)
end

function fixed_window.reset_after(booked, now)
  if booked.count == 0 then
    return 0
  end
  return math.max(booked.finish - now, 0)
end

function fixed_window.admitted(p, booked, now)
  return admitted(p[1], fixed_window.remaining(p, booked), fixed_window.reset_after(booked, now))
end

function fixed_window.limited(p, booked, now, retry)
  return limited(retry, p[1], fixed_window.remaining(p, booked), fixed_window.reset_after(booked, now))
end

-- Where n more go: the last booked window if they fit in it (false, with its new
-- count), else the one after it (true, with n).
function fixed_window.place(p, booked, n)
  if booked.count + n <= p[1] then
    return false, booked.count + n
  end
  return true, n
end

-- Takes n now: the verdict, and the current window's new count if n > 0 are taken
-- (or, counting denied acquires, if a denial is counted).
function fixed_window.take(p, booked, now, n, counting)
  if n > p[1] then
    return never(p[1])
  end
  if n == 0 then
    if counting and booked.ahead == 0 and booked.count > p[1] then
      return fixed_window.limited(p, booked, now, math.max(booked.finish - now, 0))
    end
    return fixed_window.admitted(p, booked, now)
  end
  local next, count = fixed_window.place(p, booked, n)
  if booked.ahead == 0 and not next then
    local after = {finish = booked.finish, ahead = 0, count = count}
    return fixed_window.admitted(p, after, now), count
  end
  if counting and booked.ahead == 0 and booked.count <= p[1] then
    -- The denial tells what was left before it; the window is now over its limit.
    return fixed_window.limited(p, booked, now, math.max(booked.finish - now, 0)), p[1] + 1
  end
  local fits_at = next and booked.finish or booked.start
  return fixed_window.limited(p, booked, now, math.max(fits_at - now, 0))
end

-- Books n in the last booked window or the next: the verdict, then, if n > 0 are
-- booked, whether in the next window and its new count.
function fixed_window.book(p, booked, now, n, max_wait)
  if n > p[1] then
    return never(p[1])
  end
  if n == 0 then
    return reserved(0)
  end
  local next, count = fixed_window.place(p, booked, n)
  local wait = math.max((next and booked.finish or booked.start) - now, 0)
  if wait > max_wait then
    return fixed_window.limited(p, booked, now, wait - max_wait)
  end
  return reserved(wait), next, count
end

-- Gives back the newest n booked, the windows before the last booked one counting as
-- full: how many windows the last booked one moves back, and its count; nil when
-- nothing stays booked. (Rust's ahead × limit − rest, without the product.)
function fixed_window.give_back(p, booked, n)
  if n < booked.count then
    return 0, booked.count - n
  end
  local rest = n - booked.count
  local back = fixed_window.div_floor(rest, p[1]) + 1
  if back > booked.ahead then
    return nil
  end
  return back, back * p[1] - rest
end

-- The aligned window's last booked index, and the booking seen at now.
function fixed_window.aligned_view(p, state, now)
  local current = fixed_window.div_floor(now + p[3], p[2])
  local index, count = fixed_window.read(state)
  if count == 0 or index < current then
    index, count = current, 0
  end
  return index, {
    start = math.max(index * p[2] - p[3], 0),
    finish = (index + 1) * p[2] - p[3],
    ahead = index - current,
    count = count,
  }
end

function fixed_window.first_hit_view(p, state, now)
  local start, count = fixed_window.read(state)
  local finish = start + p[2]
  if count == 0 or finish <= now then
    return {start = now, finish = now + p[2], ahead = 0, count = 0}
  end
  -- start > now: reservations booked a later window; those before it run back to back.
  local ahead = fixed_window.div_floor(math.max(start - now, 0) + p[2] - 1, p[2])
  return {start = start, finish = finish, ahead = ahead, count = count}
end

ALGORITHMS.fixed_window = {
  acquire = function(p, state, now, n)
    local index, booked = fixed_window.aligned_view(p, state, now)
    local verdict, count = fixed_window.take(p, booked, now, n, p[4] == 1)
    if count == nil then
      return verdict
    end
    return verdict, fixed_window.write(index, count)
  end,

  reserve = function(p, state, now, n, max_wait)
    local index, booked = fixed_window.aligned_view(p, state, now)
    local verdict, next, count = fixed_window.book(p, booked, now, n, max_wait)
    if next == nil then
      return verdict
    end
    return verdict, fixed_window.write(next and index + 1 or index, count)
  end,

  refund = function(p, state, now, n)
    local index, booked = fixed_window.aligned_view(p, state, now)
    local back, count = fixed_window.give_back(p, booked, n)
    if back == nil then
      return fixed_window.write(0, 0)
    end
    return fixed_window.write(index - back, count)
  end,

  -- The end of the last booked window.
  expires_at = function(p, state)
    local index, count = fixed_window.read(state)
    if count == 0 then
      return 0
    end
    return (index + 1) * p[2] - p[3]
  end,
}

ALGORITHMS.fixed_window_first_hit = {
  acquire = function(p, state, now, n)
    local booked = fixed_window.first_hit_view(p, state, now)
    local verdict, count = fixed_window.take(p, booked, now, n, p[3] == 1)
    if count == nil then
      return verdict
    end
    return verdict, fixed_window.write(booked.start, count)
  end,

  reserve = function(p, state, now, n, max_wait)
    local booked = fixed_window.first_hit_view(p, state, now)
    local verdict, next, count = fixed_window.book(p, booked, now, n, max_wait)
    if next == nil then
      return verdict
    end
    return verdict, fixed_window.write(next and booked.finish or booked.start, count)
  end,

  refund = function(p, state, now, n)
    local booked = fixed_window.first_hit_view(p, state, now)
    local back, count = fixed_window.give_back(p, booked, n)
    if back == nil then
      return fixed_window.write(0, 0)
    end
    return fixed_window.write(math.max(booked.start - back * p[2], 0), count)
  end,

  expires_at = function(p, state)
    local start, count = fixed_window.read(state)
    if count == 0 then
      return 0
    end
    return start + p[2]
  end,
}
