-- expect: got boolean
-- line: 3
function dispatch(s, hw)
  return true
end
