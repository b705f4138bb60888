-- expect: no num_splits
-- line: 3
function dispatch(s, hw)
  return {}
end
