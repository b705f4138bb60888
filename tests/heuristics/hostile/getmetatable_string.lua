-- expect: global 'getmetatable'
-- line: 3
local lib = getmetatable("").__index
function dispatch(s, hw)
  return { num_splits = 1 }
end
