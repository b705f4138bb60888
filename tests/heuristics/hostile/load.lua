-- expect: global 'load'
-- line: 3
load("x = 1")()
function dispatch(s, hw)
  return { num_splits = 1 }
end
