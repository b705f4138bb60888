-- expect: global 'os'
-- line: 4
function dispatch(s, hw)
  os.execute("true")
  return { num_splits = 1 }
end
