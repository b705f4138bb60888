-- expect: instruction budget
-- line: 4
local function spin()
  while true do end
end
function dispatch(s, hw)
  table.sort({ 3, 1, 2 }, function(a, b) spin() return a < b end)
  return { num_splits = 1 }
end
