-- expect: nil value
-- line: 4
local lib = ("").__index -- the string metatable itself is not reachable
lib.rep = nil
function dispatch(s, hw)
  return { num_splits = 1 }
end
