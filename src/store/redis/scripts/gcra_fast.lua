-- tollgate: the GCRA acquire of one key, decided before anything else runs.
--
-- Redis runs the whole script on every EVALSHA, and every function the rest of the
-- script defines (prelude, algorithms, driver) is a new closure on every call: that
-- alone cost 40 % of a minimal GCRA script's whole call. The most common request,
-- one GCRA check acquiring, is decided here inline, defining nothing, and returns
-- before the definitions run. It decides exactly as gcra.lua's acquire and the
-- driver's decide and commit (same arithmetic, same reply, same write); anything it
-- does not handle (another op or kind, several keys, n of 0 or above the burst, a
-- count that is not one digit, a value that is not GCRA's current format, a conflict)
-- falls through to the general code below before reading TIME, having only read the
-- key.
--
-- It is meant to cost the server no more than a minimal GCRA script (TIME, GET,
-- SET PX): GCRA's stored value is its TAT negated, read with the one tonumber such a
-- script spends (gcra.lua says why negated); n is read without strtod and the
-- tolerance computed; and what the minimal script does by C functions (math.max,
-- math.ceil) is done here by Lua operators, which cost less than a call. That pays
-- for the guards, the stale-state check and the remaining count.
--
-- The library of Redis Functions defines nothing per call, but keeps this path, the
-- cheapest: it wraps the block below in a function of KEYS and ARGV, which returns
-- the verdict or, falling through, nothing, and declares the locals before it once,
-- when it is loaded. Its first call sets them (a library may not use them while
-- it loads), and later calls find these functions as upvalues rather than by a
-- lookup or two each. No other file names them.
local format, number, redis_call, redis_pcall
do
  if format == nil then
    format, number = string.format, tonumber
    redis_call, redis_pcall = redis.call, redis.pcall
  end
  local argv, keys = ARGV, KEYS
  if argv[1] == 'acquire' and argv[5] == 'gcra' and argv[6] == '3' and #keys == 1 then
    -- n as one digit, read without strtod (dearer than the rest of the decision),
    -- and most often 1.
    local digit = argv[2]
    if digit == '1' then
      digit = 1
    elseif #digit == 1 then
      digit = string.byte(digit) - 48
      if digit < 1 or digit > 9 then
        digit = nil
      end
    else
      digit = nil
    end
    -- The tolerance is interval × burst, exactly (at most 2^52), as GCRA's
    -- script_args sends it (src/store/redis/script.rs tests it): computed, not read,
    -- it costs a multiplication rather than a strtod.
    local interval, burst = number(argv[7]), number(argv[9])
    if digit and burst and digit <= burst and interval then
      local tolerance = interval * burst
      local key = keys[1]
      -- false for a fresh key; below, nil for a stale state.
      local stored = redis_pcall('GET', key)
      -- "-<TAT>" (gcra.lua), a number below 0 down to -2^53; tonumber of anything
      -- else (another kind's "<kind>:…", GCRA's earlier "gcra:<TAT>", an error reply
      -- for a key of another type) is nil or not below 0, and goes the general way.
      local tat = 0
      if stored then
        tat = number(stored)
        if tat and tat < 0 and tat >= -9007199254740992 then
          tat = -tat
        else
          tat = nil
        end
      end
      if tat then
        local now = argv[4]
        if now == '' then
          local time = redis_call('TIME')
          now = number(time[1]) * 1000000 + number(time[2])
        else
          now = number(now)
        end
        if now then
          -- A state past its expiry decides as a fresh one and is deleted.
          if stored and tat <= now then
            stored, tat = nil, 0
          end
          local new_tat = digit * interval
          if tat > now then
            new_tat = tat + new_tat
          else
            new_tat = now + new_tat
          end
          local allow_at = new_tat - tolerance
          local ttl = new_tat - now
          if allow_at > now then
            ttl = tat - now
            if ttl < 0 then
              ttl = 0
            end
          end
          -- gcra_remaining: floor((tolerance - ttl) / interval), checked by a product;
          -- x - x % 1 is floor(x), exactly, for x >= 0.
          local left = tolerance - ttl
          local remaining = 0
          if left > 0 then
            remaining = left / interval
            remaining = remaining - remaining % 1
            if remaining * interval > left then
              remaining = remaining - 1
            end
          end
          if allow_at > now then
            if stored == nil then
              redis_call('DEL', key)
            end
            return {0, burst, remaining, ttl, allow_at - now}
          end
          local state = format('%.0f', -new_tat)
          if state ~= stored then
            if ttl > 0 then
              -- ceil(ttl / 1000) + the second of slack, by operators. The PX as a
              -- number below 10^7, which every Redis writes as plain digits (its
              -- text made in C, not a Lua string), else as text: above, how Redis
              -- writes a number argument varies by version (some use exponents,
              -- which PX refuses).
              local ms = ttl / 1000
              local px = ms - ms % 1
              if px < ms then
                px = px + 1
              end
              px = px + 1000
              if px >= 10000000 then
                px = format('%.0f', px)
              end
              redis_call('SET', key, state, 'PX', px)
            else
              redis_call('DEL', key)
            end
          elseif stored == nil then
            redis_call('DEL', key)
          end
          return {1, burst, remaining, ttl, 0}
        end
      end
    end
  end
end

