-- expect: global 'rawequal'
-- line: 3
local same = rawequal(string, string)
function dispatch(s, hw)
  return { num_splits = 1 }
end
