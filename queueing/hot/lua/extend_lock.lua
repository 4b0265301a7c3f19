-- Hold a lock longer, only if this holder still owns it.
--
-- KEYS[1]  lock    string (set with NX and an expiry by the holder)
-- ARGV[1]  the holder's token
-- ARGV[2]  its new time to live, in milliseconds
-- Returns 1 when extended, 0 when the lock had expired or belongs to someone else.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
