-- Raise one lane's copy of a tier's admitted front (the largest order key let in), never
-- lower it: a later admission run may let in a fan who came back with a smaller key.
--
-- KEYS[1]  front   string  the largest order key admitted from the tier
-- ARGV[1]  order key
local current = tonumber(redis.call('GET', KEYS[1]) or '-1')
if tonumber(ARGV[1]) > current then
  redis.call('SET', KEYS[1], ARGV[1])
end
return 0
