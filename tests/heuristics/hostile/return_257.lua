-- expect: got 257
-- line: 3
function dispatch(s, hw)
  return { num_splits = 257 }
end
