-- expect: field 'pack'
-- line: 3
local p = string.pack("c1000000000", "")
function dispatch(s, hw)
  return { num_splits = 1 }
end
