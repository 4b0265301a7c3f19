-- One lane's counts, and how many of its fans hold an order key below each of some keys:
-- the keys of fans who just joined other lanes (queueing/line/lanes.py, join views).
--
-- KEYS[1]  epoch     string  the lane's index state (see locate.lua)
-- KEYS[2]  prequeue  zset    the lane's pre-queue
-- KEYS[3..] tiers    zset    the lane's tier queues, in layout order
-- ARGV     pairs (tier position, 1-based in layout order; order key)
--
-- Returns {epoch_state} when the lane's index is missing, else
-- {epoch_state, prequeue_count, tier_count_1, ..., below_1, ...}, one below per pair.
local epoch = redis.call('GET', KEYS[1])
if not epoch then
  return {0}
end
local state = 2
if string.sub(epoch, 1, 9) == 'building:' then
  state = 1
end
local out = {state, redis.call('ZCARD', KEYS[2])}
for i = 3, #KEYS do
  out[#out + 1] = redis.call('ZCARD', KEYS[i])
end
for i = 1, #ARGV, 2 do
  out[#out + 1] = redis.call('ZCOUNT', KEYS[2 + tonumber(ARGV[i])], '-inf', '(' .. ARGV[i + 1])
end
return out
