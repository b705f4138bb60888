-- expect: unknown field 'num_split'
-- line: 3
function dispatch(s, hw)
  return { num_splits = 2, num_split = 3 }
end
