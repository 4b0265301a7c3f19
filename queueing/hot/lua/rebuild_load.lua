-- Load a batch of entries read from PostgreSQL into an event's index during a rebuild.
--
-- KEYS[1]  epoch        string  must still hold this rebuild's "building:<run id>:<token>"
-- KEYS[2]  tombstones   set     ids removed since the rebuild began: skipped
-- KEYS[3]  heartbeats   zset
-- KEYS[4]  target       zset    a tier queue or the pre-queue
-- ARGV[1]  this rebuild's building value
-- ARGV[2]  heartbeat deadline given to loaded entries (unix seconds; a grace period)
-- ARGV[3..] pairs: entry id, order key
-- Returns the number of entries loaded, or -1 when the epoch is no longer this rebuild's
-- (Redis was flushed again, or another rebuild took over): the caller must stop.
-- ZADD NX: an entry that joined during the rebuild and added itself keeps its own values.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return -1
end
local loaded = 0
for i = 3, #ARGV, 2 do
  local member = ARGV[i]
  if redis.call('SISMEMBER', KEYS[2], member) == 0 then
    redis.call('ZADD', KEYS[4], 'NX', ARGV[i + 1], member)
    redis.call('ZADD', KEYS[3], 'NX', ARGV[2], member)
    loaded = loaded + 1
  end
end
return loaded
