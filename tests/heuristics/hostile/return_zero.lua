-- expect: num_splits must be an integer in [1, 256], got 0
-- line: 3
function dispatch(s, hw)
  return { num_splits = 0 }
end
