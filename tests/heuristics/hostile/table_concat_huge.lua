-- expect: table.concat range
-- line: 3
local s = table.concat({}, "", 1, 1e15)
function dispatch(s, hw)
  return { num_splits = 1 }
end
