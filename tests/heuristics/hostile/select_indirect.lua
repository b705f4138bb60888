-- expect: nil value
-- line: 4
local f = select(2, "x", load)
f("return 1")
function dispatch(s, hw)
  return { num_splits = 1 }
end
