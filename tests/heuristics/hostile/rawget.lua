-- expect: global 'rawget'
-- line: 3
local io = rawget(_ENV, "io")
function dispatch(s, hw)
  return { num_splits = 1 }
end
