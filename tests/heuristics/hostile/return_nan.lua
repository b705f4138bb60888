-- expect: got nan
-- line: 3
function dispatch(s, hw)
  return { num_splits = 0 / 0 }
end
