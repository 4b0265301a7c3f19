-- Before a password is checked: refuse while the caller is locked out, else count the
-- attempt as a failure until it is known to have succeeded. Counting it up front means a
-- parallel burst cannot check more passwords than the budget allows.
--
-- KEYS[1]  failures  zset  attempt id -> time (unix seconds)
-- KEYS[2]  lock      string, the unix time the lockout ends
-- ARGV[1]  now (unix seconds, float)
-- ARGV[2]  window (seconds) over which failures are counted
-- ARGV[3]  limit (failures per window)
-- ARGV[4]  lockout (seconds)
-- ARGV[5]  a unique id for this attempt
-- Returns {allowed (1/0), seconds until the lockout ends (0 when allowed), 1 if this call
-- started the lockout else 0, failures counted}.
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local lockout = tonumber(ARGV[4])
local locked_until = tonumber(redis.call('GET', KEYS[2]) or '0')
if locked_until > now then
  return {0, tostring(locked_until - now), 0, 0}
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count >= limit then
  -- Attempts still running have used the budget up: lock now. The failures go with the lock,
  -- so the caller starts afresh when it ends.
  redis.call('SET', KEYS[2], tostring(now + lockout), 'PX', math.ceil(lockout * 1000) + 1000)
  redis.call('DEL', KEYS[1])
  return {0, tostring(lockout), 1, count}
end
redis.call('ZADD', KEYS[1], now, ARGV[5])
redis.call('PEXPIRE', KEYS[1], math.ceil(window * 1000))
return {1, '0', 0, count + 1}
