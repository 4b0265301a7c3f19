-- Release a lock only if this holder still owns it.
--
-- KEYS[1]  lock    string (set with NX and an expiry by the holder)
-- ARGV[1]  the holder's token
-- Returns 1 when released, 0 when the lock had expired or belongs to someone else.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
