-- Whether an event's index can be trusted, judged on the node that holds it.
--
-- KEYS[1]  epoch  string "building:<run id>:<token>" | "ready:<run id>:<token>"
-- Returns 0 when missing, or written by another Redis run (a restart, or a replica that took
-- over and may lag its master), 1 when building, 2 when ready.
local epoch = redis.call('GET', KEYS[1])
if not epoch then
  return 0
end
local state, run_id = string.match(epoch, '^(%a+):(%x+):')
if run_id ~= string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') then
  return 0
end
if state == 'building' then
  return 1
end
return 2
