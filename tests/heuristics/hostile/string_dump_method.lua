-- expect: field 'dump'
-- line: 3
local bytes = ("").dump(function() end)
function dispatch(s, hw)
  return { num_splits = 1 }
end
