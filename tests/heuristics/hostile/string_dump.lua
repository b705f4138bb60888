-- expect: field 'dump'
-- line: 6
function dispatch(s, hw)
  return { num_splits = 1 }
end
local bytes = string.dump(dispatch)
