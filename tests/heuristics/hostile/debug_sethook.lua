-- expect: global 'debug'
-- line: 3
debug.sethook()
function dispatch(s, hw)
  return { num_splits = 1 }
end
