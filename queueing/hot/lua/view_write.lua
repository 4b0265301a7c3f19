-- Keep what fans who just joined one lane were counted behind in the other lanes, each with
-- their tier's admission counts as this lane holds them now (read after the other lanes were
-- counted, as a summary reads its lanes before the counts: queueing/line/lanes.py).
--
-- KEYS[1]  admitted  hash    the lane's "total:<tier>", "here:<tier>" (see locate.lua)
-- KEYS[2..] views    string  one per fan (keys.join_view)
-- ARGV[1]  seconds the views are kept
-- ARGV[2..] pairs (tier id, the view's JSON), one per view
--
-- Returns {{total, here}, ...}, one per view (0 where never counted).
local out = {}
for i = 2, #KEYS do
  local tier = ARGV[2 * i - 2]
  local let_in = redis.call('HMGET', KEYS[1], 'total:' .. tier, 'here:' .. tier)
  local total, here = tonumber(let_in[1] or 0), tonumber(let_in[2] or 0)
  redis.call('SET', KEYS[i], ARGV[2 * i - 1] .. '|' .. total .. '|' .. here, 'EX', ARGV[1])
  out[#out + 1] = {total, here}
end
return out
