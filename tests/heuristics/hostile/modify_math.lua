-- expect: read-only table 'math'
-- line: 3
math.pi = 3
function dispatch(s, hw)
  return { num_splits = 1 }
end
