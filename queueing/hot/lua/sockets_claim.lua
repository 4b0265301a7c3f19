-- A WebSocket opens on a ticket: register it, and name the oldest sockets over the cap.
--
-- KEYS[1]  the ticket's sockets   zset   channel name -> arrival number (1, 2, 3, ...)
-- ARGV[1]  this socket's channel name
-- ARGV[2]  most sockets kept open per ticket (>= 1)
-- ARGV[3]  TTL of the set (seconds)
-- Returns the channel names taken out (oldest first): their pages are told to go. The newest
-- socket always stays, so a socket whose process died (never taken out) is pushed out by the
-- next arrivals rather than holding a place. Arrival numbers, not clocks: web processes'
-- clocks may disagree.
local last = redis.call('ZREVRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local arrival = 1
if last[2] then
  arrival = tonumber(last[2]) + 1
end
redis.call('ZADD', KEYS[1], arrival, ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
local keep = tonumber(ARGV[2])
local over = redis.call('ZRANGE', KEYS[1], 0, -(keep + 1))
if #over > 0 then
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(keep + 1))
end
return over
