-- The room's beat reached Redis at ARGV[1] (unix seconds). KEYS[1]: when it last did;
-- KEYS[2]: since when heartbeats have been recorded without a gap. A gap longer than ARGV[2]
-- seconds (Redis away, or back without its data) starts a new "since". Returns "since".
local now = tonumber(ARGV[1])
local last = tonumber(redis.call('GET', KEYS[1]) or '')
if not last or now - last > tonumber(ARGV[2]) or not redis.call('GET', KEYS[2]) then
  redis.call('SET', KEYS[2], ARGV[1])
end
redis.call('SET', KEYS[1], ARGV[1])
return redis.call('GET', KEYS[2])
