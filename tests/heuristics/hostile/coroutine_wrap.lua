-- expect: global 'coroutine'
-- line: 3
local co = coroutine.wrap(function() while true do end end)
function dispatch(s, hw)
  return { num_splits = 1 }
end
