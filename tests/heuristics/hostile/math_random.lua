-- expect: field 'random'
-- line: 4
function dispatch(s, hw)
  return { num_splits = math.random(1, 8) }
end
