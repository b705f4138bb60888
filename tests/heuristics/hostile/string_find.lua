-- expect: field 'find'
-- line: 3
local i = string.find(("a"):rep(40), "(.-)(.-)(.-)(.-)(.-)b")
function dispatch(s, hw)
  return { num_splits = 1 }
end
