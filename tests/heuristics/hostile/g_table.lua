-- expect: global '_G'
-- line: 3
_G.io.open("/etc/passwd")
function dispatch(s, hw)
  return { num_splits = 1 }
end
