-- wrk: join the on-sale named in the URL as a new fan each time (no cookie: a new identity),
-- from a client address of its own in X-Forwarded-For (the server trusts one proxy hop), so
-- that the production join limits (per address, per identity) run on every join without
-- refusing the load generator. Addresses are /64s of the documentation prefix 2001:db8::/32
-- (the limit counts an IPv6 /64 as one subscriber); only a header: no traffic goes there.
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("seed", threads)
end

function init(args)
  math.randomseed(os.time() * 100 + seed)
end

function request()
  local address = string.format(
    "2001:db8:%x:%x::1", math.random(0, 65535), math.random(0, 65535))
  return wrk.format("POST", nil, {
    ["Content-Type"] = "application/json",
    ["X-Forwarded-For"] = address,
  }, "{}")
end
