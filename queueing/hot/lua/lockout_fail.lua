-- After a password check failed (its attempt, counted by lockout_reserve.lua, stays counted):
-- lock the caller out once its failures reach the limit.
--
-- KEYS[1]  failures  zset  attempt id -> time (unix seconds)
-- KEYS[2]  lock      string, the unix time the lockout ends
-- ARGV[1]  now (unix seconds, float)
-- ARGV[2]  window (seconds) over which failures are counted
-- ARGV[3]  limit (failures per window)
-- ARGV[4]  lockout (seconds)
-- Returns {seconds until the lockout ends (0 when not locked out), 1 if this call started the
-- lockout else 0, failures counted}.
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local lockout = tonumber(ARGV[4])
local locked_until = tonumber(redis.call('GET', KEYS[2]) or '0')
if locked_until > now then
  -- A parallel attempt locked the caller out already.
  return {tostring(locked_until - now), 0, 0}
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count >= limit then
  redis.call('SET', KEYS[2], tostring(now + lockout), 'PX', math.ceil(lockout * 1000) + 1000)
  redis.call('DEL', KEYS[1])
  return {tostring(lockout), 1, count}
end
return {'0', 0, count}
