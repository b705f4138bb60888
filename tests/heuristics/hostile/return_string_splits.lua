-- expect: num_splits must be an integer
-- line: 3
function dispatch(s, hw)
  return { num_splits = "2" }
end
