-- expect: got string
-- line: 3
function dispatch(s, hw)
  return "num_splits = 4"
end
