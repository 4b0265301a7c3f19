-- Drop an event's whole line from its hot index: everyone in it has left the line in
-- PostgreSQL (the on-sale closed and its line was revoked), so its sorted sets go whole, with
-- one UNLINK, rather than one removal per fan. UNLINK, not DEL: a million members are freed
-- in Redis' background thread, not while every other command waits.
--
-- KEYS[1]  epoch        string
-- KEYS[2]  heartbeats   zset
-- KEYS[3]  prequeue     zset
-- KEYS[4]  holders      hash
-- KEYS[5..] tier queues zset
-- Returns the number of keys deleted. A rebuild under way read its entries from PostgreSQL
-- before the line ended, and would load them again: its epoch is deleted too, so that its
-- loads and promotion fail (epoch.py, RebuildSuperseded) and the index is rebuilt afterwards,
-- from an empty line. A ready epoch stays: the empty line is the whole truth.
local epoch = redis.call('GET', KEYS[1])
local dropped = 0
if epoch and string.sub(epoch, 1, 9) == 'building:' then
  dropped = redis.call('DEL', KEYS[1])
end
return dropped + redis.call('UNLINK', unpack(KEYS, 2, #KEYS))
