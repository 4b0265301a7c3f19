-- A small sketch of an event's line for the broadcast tick: per tier, its size and the order
-- key found at a fixed set of ranks. Cost: O(checkpoints * log n) per tier, whatever the size.
--
-- KEYS[1]  epoch        string  (missing: nothing is read)
-- KEYS[2]  prequeue     zset    (counted)
-- KEYS[3..] tier queues zset    every tier queue of the event, in layout order
-- ARGV     the checkpoint ranks (0-based, ascending); the last rank of each tier is added
--
-- Returns {epoch_state, prequeue_count, {count, rank, key, rank, key, ...}, {...}, ...}
--   epoch_state: 0 missing, 1 building, 2 ready; keys are returned as strings. No TTLs.
local epoch = redis.call('GET', KEYS[1])
if not epoch then
  return {0, 0}
end
local state = 2
if string.sub(epoch, 1, 9) == 'building:' then
  state = 1
end
local out = {state, redis.call('ZCARD', KEYS[2])}
for k = 3, #KEYS do
  local count = redis.call('ZCARD', KEYS[k])
  local tier = {count}
  local last = -1
  for i = 1, #ARGV do
    local rank = tonumber(ARGV[i])
    if rank >= count then
      break
    end
    local hit = redis.call('ZRANGE', KEYS[k], rank, rank, 'WITHSCORES')
    tier[#tier + 1] = rank
    tier[#tier + 1] = hit[2]
    last = rank
  end
  if count > 0 and last ~= count - 1 then
    local hit = redis.call('ZRANGE', KEYS[k], count - 1, count - 1, 'WITHSCORES')
    tier[#tier + 1] = count - 1
    tier[#tier + 1] = hit[2]
  end
  out[#out + 1] = tier
end
return out
