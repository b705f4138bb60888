-- expect: invalid conversion
-- line: 3
local s = string.format("%99999d", 1)
function dispatch(s, hw)
  return { num_splits = 1 }
end
