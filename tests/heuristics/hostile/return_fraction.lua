-- expect: got 2.5
-- line: 3
function dispatch(s, hw)
  return { num_splits = 2.5 }
end
