-- The run id of the Redis node that holds KEYS[1] (on a cluster, the master of its slot).
--
-- KEYS[1]  any key: only routes the call to its node
-- Returns the run id, which changes whenever that Redis restarts or another node (a replica
-- that took over) serves the slot.
return string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
