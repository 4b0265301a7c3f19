-- Mark a finished rebuild ready, unless the epoch changed under it, and drop its tombstones.
--
-- KEYS[1]  epoch        string
-- KEYS[2]  tombstones   set
-- ARGV[1]  the building value this rebuild set ("building:<run id>:<token>")
-- ARGV[2]  the ready value to set ("ready:<run id>:<token>")
-- Returns 1 when promoted, 0 when the epoch is no longer ours (Redis was flushed, or another
-- rebuild started), in which case the load is not trusted. No TTL.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  redis.call('DEL', KEYS[2])
  return 1
end
return 0
