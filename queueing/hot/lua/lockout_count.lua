-- Count a password login against one budget (an account's, or an address's), and lock the
-- caller out once its failures reach the limit.
--   Before a password is checked (ARGV[5] = the attempt's id): refuse while locked out, else
--   count the attempt as a failure until it is known to have succeeded (lockout_forget).
--   Counting it up front means a parallel burst cannot check more passwords than the budget.
--   After a password check failed (ARGV[5] = ''): its attempt stays counted; only the lock is
--   decided again (a parallel attempt may have locked the caller out meanwhile).
--
-- KEYS[1]  failures  zset  attempt id -> time (unix seconds)
-- KEYS[2]  lock      string, the unix time the lockout ends
-- ARGV[1]  now (unix seconds, float)
-- ARGV[2]  window (seconds) over which failures are counted
-- ARGV[3]  limit (failures per window)
-- ARGV[4]  lockout (seconds)
-- ARGV[5]  this attempt's unique id, or '' after a failed check
-- Returns {seconds until the lockout ends (0 when not locked out), 1 if this call started the
-- lockout else 0, failures counted}.
-- TTLs: the lock expires a second after the lockout ends; the failures a window after the last.
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local lockout = tonumber(ARGV[4])
local locked_until = tonumber(redis.call('GET', KEYS[2]) or '0')
if locked_until > now then
  return {tostring(locked_until - now), 0, 0}
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count >= limit then
  -- The budget is used up (by failures, or by attempts still running): lock now. The
  -- failures go with the lock, so the caller starts afresh when it ends.
  redis.call('SET', KEYS[2], tostring(now + lockout), 'PX', math.ceil(lockout * 1000) + 1000)
  redis.call('DEL', KEYS[1])
  return {tostring(lockout), 1, count}
end
if ARGV[5] ~= '' then
  redis.call('ZADD', KEYS[1], now, ARGV[5])
  redis.call('PEXPIRE', KEYS[1], math.ceil(window * 1000))
  count = count + 1
end
return {'0', 0, count}
