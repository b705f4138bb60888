-- expect: global 'utf8'
-- line: 3
local n = utf8.len("x")
function dispatch(s, hw)
  return { num_splits = 1 }
end
