-- expect: global 'rawlen'
-- line: 3
local n = rawlen({})
function dispatch(s, hw)
  return { num_splits = 1 }
end
