-- expect: global 'loadfile'
-- line: 3
loadfile("/etc/passwd")
function dispatch(s, hw)
  return { num_splits = 1 }
end
