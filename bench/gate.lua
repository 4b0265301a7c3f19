-- wrk: the gate's check as nginx's auth_request asks it, GET /gate/<SLUG>/check with the
-- original request in X-Original-* headers. Nine requests in ten carry a pass cookie (passes
-- read from the file named in PASSES, round robin); every tenth has none and is refused (401).
-- At the end, the statuses seen are printed as "gate statuses: <status>=<count> ...".
local passes = {}
local index = 0
local path = "/gate/" .. (os.getenv("SLUG") or "gate") .. "/check"
local cookie_name = "wr_pass_" .. (os.getenv("SLUG") or "gate")
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  for line in io.lines(os.getenv("PASSES")) do
    passes[#passes + 1] = line
  end
  statuses = {}
end

function request()
  index = index + 1
  local headers = {
    ["X-Original-URI"] = "/tickets/seat?row=12",
    ["X-Original-Host"] = "shop.example",
    ["X-Original-Proto"] = "https",
    -- What nginx forwards of the fan: their address and browser, for the on-sale's traffic
    -- rules (bench/table_rows.py's GATE_TRAFFIC_RULES: none matches).
    ["X-Original-Remote-Addr"] = "203.0.113." .. (index % 250 + 1),
    ["User-Agent"] = "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0",
  }
  if index % 10 ~= 0 then
    headers["Cookie"] = cookie_name .. "=" .. passes[index % #passes + 1]
  end
  return wrk.format("GET", path, headers)
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local total = {}
  for _, thread in ipairs(threads) do
    for status, count in pairs(thread:get("statuses")) do
      total[status] = (total[status] or 0) + count
    end
  end
  local line = "gate statuses:"
  for status, count in pairs(total) do
    line = line .. " " .. status .. "=" .. count
  end
  io.write(line .. "\n")
end
