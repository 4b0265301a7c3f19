-- Take entries out of an event's hot index (they left the line in PostgreSQL).
--
-- KEYS[1]  epoch        string
-- KEYS[2]  tombstones   set     entry ids removed while a rebuild runs
-- KEYS[3]  heartbeats   zset
-- KEYS[4]  prequeue     zset
-- KEYS[5]  tier queue   zset    the entries' tier queue
-- KEYS[6]  holders      hash    entry id -> holder key of moved places (locate.lua)
-- ARGV[1..] entry ids
-- Returns the number of entry ids given. While the epoch is "building:", the ids are also
-- added to the tombstones so that the rebuild, which may have read them from PostgreSQL before
-- they changed, does not load them again. Tombstones live until the rebuild finishes.
-- One command per key for a slice of ids (a bulk expiry hands tens of thousands), not one
-- per id; slices stay under Lua's limit on the arguments of one call.
local building = false
local epoch = redis.call('GET', KEYS[1])
if epoch and string.sub(epoch, 1, 9) == 'building:' then
  building = true
end
local slice = 4000
for first = 1, #ARGV, slice do
  local last = math.min(first + slice - 1, #ARGV)
  if building then
    redis.call('SADD', KEYS[2], unpack(ARGV, first, last))
  end
  redis.call('ZREM', KEYS[3], unpack(ARGV, first, last))
  redis.call('ZREM', KEYS[4], unpack(ARGV, first, last))
  redis.call('ZREM', KEYS[5], unpack(ARGV, first, last))
  redis.call('HDEL', KEYS[6], unpack(ARGV, first, last))
end
return #ARGV
