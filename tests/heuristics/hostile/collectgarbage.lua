-- expect: global 'collectgarbage'
-- line: 3
collectgarbage("stop")
function dispatch(s, hw)
  return { num_splits = 1 }
end
