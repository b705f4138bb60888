-- expect: got -1
-- line: 3
function dispatch(s, hw)
  return { num_splits = -1 }
end
