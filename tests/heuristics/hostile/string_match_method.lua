-- expect: method 'match'
-- line: 3
local m = ("aaaa"):match("(.-)(.-)b")
function dispatch(s, hw)
  return { num_splits = 1 }
end
