-- Hold a key for one owner: taken when free, kept (and its expiry renewed) by the owner that
-- holds it, taken over from a holder the caller found to be stale.
--
-- KEYS[1]  claim   string  the holder's name; expires ARGV[2] seconds after the last take
-- ARGV[1]  the owner asking
-- ARGV[2]  expiry (seconds)
-- ARGV[3]  a holder to replace (the caller found it no longer needs the key), or ""
-- Returns the holder after the call: ARGV[1] when the owner holds it now.
local held = redis.call('GET', KEYS[1])
if held and held ~= ARGV[1] and (ARGV[3] == '' or held ~= ARGV[3]) then
  return held
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return ARGV[1]
