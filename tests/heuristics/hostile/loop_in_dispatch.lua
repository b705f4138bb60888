-- expect: instruction budget
-- line: 5
function dispatch(s, hw)
  local n = 0
  while true do n = n + 1 end
end
