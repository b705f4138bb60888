-- expect: unknown field [1]
-- line: 3
function dispatch(s, hw)
  return { 4, num_splits = 2 }
end
