-- Load a chunk of entries read from PostgreSQL into an event's index during a rebuild.
--
-- KEYS[1]  epoch        string  must still hold this rebuild's "building:<run id>:<token>"
-- KEYS[2]  tombstones   set     ids removed since the rebuild began: skipped
-- KEYS[3]  heartbeats   zset
-- KEYS[4]  target       zset    a tier queue or the pre-queue
-- ARGV[1]  this rebuild's building value
-- ARGV[2]  heartbeat deadline given to loaded entries (unix seconds; a grace period)
-- ARGV[3..] pairs as ZADD takes them: order key, entry id
-- Returns the number of entries loaded, or -1 when the epoch is no longer this rebuild's
-- (Redis was flushed again, or another rebuild took over): the caller must stop.
-- ZADD NX: an entry that joined during the rebuild and added itself keeps its own values.
-- No TTLs. While nobody left during the rebuild (no tombstones, the usual case) the pairs go
-- in with one ZADD per PAIRS of them, as a pipeline of ZADDs would, rather than one by one.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return -1
end
-- unpack() puts its values on Lua's C stack (at most 8000 in Redis' Lua): 2 * PAIRS + 3.
local PAIRS = 2000
local check = redis.call('SCARD', KEYS[2]) > 0
local loaded = 0
for first = 3, #ARGV, 2 * PAIRS do
  local last = math.min(first + 2 * PAIRS - 1, #ARGV)
  local scores, beats = {}, {}
  for i = first, last, 2 do
    local member = ARGV[i + 1]
    if not check or redis.call('SISMEMBER', KEYS[2], member) == 0 then
      scores[#scores + 1] = ARGV[i]
      scores[#scores + 1] = member
      beats[#beats + 1] = ARGV[2]
      beats[#beats + 1] = member
    end
  end
  if #scores > 0 then
    redis.call('ZADD', KEYS[4], 'NX', unpack(scores))
    redis.call('ZADD', KEYS[3], 'NX', unpack(beats))
    loaded = loaded + #scores / 2
  end
end
return loaded
