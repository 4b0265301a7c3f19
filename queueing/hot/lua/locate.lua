-- Find (and optionally add) one entry in an event's hot index and count the line.
--
-- KEYS[1]  epoch        string  "building:<run id>:<token>" | "ready:<run id>:<token>"; missing = data lost
-- KEYS[2]  heartbeats   zset    entry id -> unix deadline
-- KEYS[3]  prequeue     zset    pre-queue entry ids by order key (counted)
-- KEYS[4]  own tier     zset    the entry's tier queue, entry ids by order key
-- KEYS[5]  holders      hash    entry id -> holder key, of places moved to another browser
-- KEYS[6]  admitted     hash    "total:<tier>", "here:<tier>": fans let in so far, from the
--                               whole line and from this lane (lines of several lanes)
-- KEYS[7]  view         string  (lines of several lanes only) what the fan was counted behind
--                               in the other lanes when they joined (keys.join_view), if kept
-- KEYS[7 or 8..] tiers  zset    every tier queue of the event, in layout order (counted)
-- ARGV[1]  entry id
-- ARGV[2]  new heartbeat deadline (unix seconds), or "" to leave it alone
-- ARGV[3]  "" to only look, "tier" or "pre" to add the entry there first (NX)
-- ARGV[4]  order key (score) when adding
-- ARGV[5]  the holder key the caller's ticket names ("" for none)
-- ARGV[6]  the entry's tier id, to read KEYS[6] and KEYS[7]; "" in a line of one lane
--          (nothing more to read, and the tiers start at KEYS[7])
--
-- Returns {epoch_state, where, rank, order_key, elsewhere, let_in, prequeue_count, tier_count_1, ...}
--   epoch_state: 0 missing (then nothing is read or written), 1 building, 2 ready
--   where: 0 not found, 1 in its tier queue, 2 in the pre-queue
--   rank: 0-based rank in its tier queue, -1 unless where == 1
--   order_key: the entry's score (as a string) where found, "" otherwise
--   elsewhere: 1 when the place was moved to a holder other than ARGV[5] (the caller must
--     not answer from here: the entry's row decides), else 0
--   let_in: {total, here, view} of the entry's tier from KEYS[6] (false where never
--     counted), and KEYS[7] (false where none is kept)
-- No key gets a TTL: the index lives as long as the event has fans in line.
local epoch = redis.call('GET', KEYS[1])
if not epoch then
  return {0, 0, -1, '', 0}
end
local state = 2
if string.sub(epoch, 1, 9) == 'building:' then
  state = 1
end
local member = ARGV[1]
if ARGV[3] == 'tier' then
  redis.call('ZADD', KEYS[4], 'NX', ARGV[4], member)
elseif ARGV[3] == 'pre' then
  redis.call('ZADD', KEYS[3], 'NX', ARGV[4], member)
end
local where = 0
local score = ''
local rank = redis.call('ZRANK', KEYS[4], member)
if rank ~= false then
  where = 1
  score = redis.call('ZSCORE', KEYS[4], member)
else
  rank = -1
  local pre = redis.call('ZSCORE', KEYS[3], member)
  if pre ~= false then
    where = 2
    score = pre
  end
end
if where ~= 0 and ARGV[2] ~= '' then
  redis.call('ZADD', KEYS[2], ARGV[2], member)
end
local elsewhere = 0
local holder = redis.call('HGET', KEYS[5], member)
if holder and holder ~= ARGV[5] then
  elsewhere = 1
end
local let_in = {false, false, false}
local tiers = 7
if ARGV[6] and ARGV[6] ~= '' then
  let_in = redis.call('HMGET', KEYS[6], 'total:' .. ARGV[6], 'here:' .. ARGV[6])
  let_in[3] = redis.call('GET', KEYS[7])
  tiers = 8
end
local out = {state, where, rank, score, elsewhere, let_in, redis.call('ZCARD', KEYS[3])}
for i = tiers, #KEYS do
  out[#out + 1] = redis.call('ZCARD', KEYS[i])
end
return out
