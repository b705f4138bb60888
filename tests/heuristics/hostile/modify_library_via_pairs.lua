-- expect: read-only table 'string'
-- line: 4
local iter, lib = pairs(string) -- pairs hands out the read-only view, never the table behind it
lib.rep = nil
function dispatch(s, hw)
  return { num_splits = 1 }
end
