-- expect: field 'gsub'
-- line: 3
local s = string.gsub("x", "x", "y")
function dispatch(s, hw)
  return { num_splits = 1 }
end
