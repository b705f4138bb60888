-- expect: got number
-- line: 3
function dispatch(s, hw)
  return 4
end
