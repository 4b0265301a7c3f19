-- wrk: poll the status of tickets read from the file named in TICKETS, round robin.
local tickets = {}
local index = 0

function init(args)
  for line in io.lines(os.getenv("TICKETS")) do
    tickets[#tickets + 1] = line
  end
end

function request()
  index = index % #tickets + 1
  return wrk.format("GET", "/api/v1/tickets/" .. tickets[index])
end
