-- expect: unknown field 'batch'
-- line: 3
function dispatch(s, hw)
  s.num_splits = 1
  return s
end
