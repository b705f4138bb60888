-- expect: too many results
-- line: 3
local n = select("#", table.unpack({}, 1, 1e8))
function dispatch(s, hw)
  return { num_splits = 1 }
end
