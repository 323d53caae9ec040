-- tollgate: the GCRA acquire of one key, decided before anything else runs.
--
-- Redis runs the whole script on every EVALSHA, and every function the rest of the
-- script defines (prelude, algorithms, driver) is a new closure on every call: that
-- alone cost 40 % of a minimal GCRA script's whole call. The most common request,
-- one GCRA check acquiring, is decided here inline, defining nothing, and returns
-- before the definitions run. It decides exactly as gcra.lua's acquire and the
-- driver's decide and commit (same arithmetic, same reply, same write); anything it
-- does not handle (another op or kind, several keys, n of 0 or above the burst, a
-- count that is not one digit, a state it cannot read, a conflict) falls through to
-- the general code below before reading TIME, having only read the key.
--
-- The library of Redis Functions defines nothing per call, but keeps this path, the
-- cheapest: it wraps the block below in a function of KEYS and ARGV, which returns
-- the verdict or, falling through, nothing, and declares the locals before it once,
-- when it is loaded. Its first call sets them (a library cannot read `string` or
-- `math` while it loads), and later calls find these functions as upvalues rather
-- than by two table lookups each. No other file names them.
local byte, sub, format, max, floor, ceil
do
  if byte == nil then
    byte, sub, format = string.byte, string.sub, string.format
    max, floor, ceil = math.max, math.floor, math.ceil
  end
  local argv = ARGV
  if argv[1] == 'acquire' and argv[5] == 'gcra' and argv[6] == '3' and #KEYS == 1 then
    -- n as one digit, read without strtod (dearer than the rest of the decision).
    local digit = #argv[2] == 1 and byte(argv[2]) - 48 or 0
    local interval, tolerance, burst = tonumber(argv[7]), tonumber(argv[8]), tonumber(argv[9])
    if digit >= 1 and digit <= 9 and burst and digit <= burst and interval and tolerance then
      local key = KEYS[1]
      -- The stored value, 'gcra:' and the TAT, is kept whole: the prefix is checked
      -- byte by byte and the new value made in one format, so that a call makes two
      -- strings (the TAT read, the value written) besides the PX. Each string
      -- made costs about as much as a Lua line, and this path is a dozen lines.
      local stored = redis.pcall('GET', key)
      local tat
      if stored == false then
        tat = 0
      elseif type(stored) == 'string' then
        local g, c, r, a, colon = byte(stored, 1, 5)
        if g == 103 and c == 99 and r == 114 and a == 97 and colon == 58 then
          tat = tonumber(sub(stored, 6))
        end
      end
      if tat then
        local now = argv[4]
        if now == '' then
          local time = redis.call('TIME')
          now = tonumber(time[1]) * 1000000 + tonumber(time[2])
        else
          now = tonumber(now)
        end
        if now then
          -- A state past its expiry decides as a fresh one and is deleted.
          local stale = false
          if stored and tat <= now then
            stored, stale, tat = nil, true, 0
          end
          local new_tat = max(tat, now) + digit * interval
          local allow_at = new_tat - tolerance
          local verdict, ttl
          if allow_at > now then
            ttl = max(tat - now, 0)
            verdict = {0, burst, 0, ttl, allow_at - now}
          else
            ttl = max(new_tat - now, 0)
            verdict = {1, burst, 0, ttl, 0}
          end
          -- gcra_remaining: floor((tolerance - ttl) / interval), checked by a product.
          local left = tolerance - ttl
          if left > 0 then
            local whole = floor(left / interval)
            if whole * interval > left then
              whole = whole - 1
            end
            verdict[3] = whole
          end
          if allow_at <= now then
            local state = format('gcra:%.0f', new_tat)
            if state ~= stored then
              local expiry = new_tat - now
              if expiry > 0 then
                -- The PX as a number below 10^7, which every Redis writes as plain
                -- digits (its text made in C, not a Lua string), else as text: above,
                -- how Redis writes a number argument varies by version (some use
                -- exponents, which PX refuses).
                local px = ceil(expiry / 1000) + 1000
                if px >= 10000000 then
                  px = format('%.0f', px)
                end
                redis.call('SET', key, state, 'PX', px)
              else
                redis.call('DEL', key)
              end
              return verdict
            end
          end
          if stale then
            redis.call('DEL', key)
          end
          return verdict
        end
      end
    end
  end
end

