-- Sliding-window rate limit for one caller, atomically: count the calls in the last window,
-- refuse if at the limit, else record this call.
--
-- KEYS[1]  calls   zset  call id -> time (unix seconds); expires one window after the last call
-- ARGV[1]  now (unix seconds, float)
-- ARGV[2]  window (seconds)
-- ARGV[3]  limit (calls per window)
-- ARGV[4]  a unique id for this call
-- ARGV[5]  '0' to only ask (judge without recording the call); anything else records it
-- Returns {allowed (1/0), seconds until a call would be allowed (0 when allowed)}.
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count >= limit then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local retry = window
  if oldest[2] then
    retry = tonumber(oldest[2]) + window - now
  end
  return {0, tostring(math.max(retry, 0.001))}
end
if ARGV[5] == '0' then
  return {1, '0'}
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('EXPIRE', KEYS[1], math.ceil(window))
return {1, '0'}
