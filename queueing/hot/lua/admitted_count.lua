-- Count fans let in, in one lane's copy of the counts (a line of several lanes).
--
-- KEYS[1]  counts   hash    "total:<tier>" (the whole line's), "here:<tier>" (this lane's)
-- ARGV     field, increment, field, increment, ...
for i = 1, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
return 0
