-- expect: global 'xpcall'
-- line: 3
xpcall(function() while true do end end, tostring)
function dispatch(s, hw)
  return { num_splits = 1 }
end
