-- expect: got -inf
-- line: 3
function dispatch(s, hw)
  return { num_splits = -math.huge }
end
