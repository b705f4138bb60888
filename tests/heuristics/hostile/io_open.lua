-- expect: global 'io'
-- line: 3
io.open("/tmp/evodispatch-hostile", "w")
function dispatch(s, hw)
  return { num_splits = 1 }
end
