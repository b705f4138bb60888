-- expect: global 'dofile'
-- line: 3
dofile("/etc/passwd")
function dispatch(s, hw)
  return { num_splits = 1 }
end
