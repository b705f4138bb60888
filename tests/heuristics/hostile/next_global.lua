-- expect: global 'next'
-- line: 3
local k = next({})
function dispatch(s, hw)
  return { num_splits = 1 }
end
