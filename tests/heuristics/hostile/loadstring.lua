-- expect: global 'loadstring'
-- line: 3
loadstring("x = 1")()
function dispatch(s, hw)
  return { num_splits = 1 }
end
