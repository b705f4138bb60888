-- expect: field 'randomseed'
-- line: 3
math.randomseed(42)
function dispatch(s, hw)
  return { num_splits = 1 }
end
