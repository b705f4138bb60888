-- expect: global 'pcall'
-- line: 3
pcall(function() while true do end end)
function dispatch(s, hw)
  return { num_splits = 1 }
end
