-- expect: instruction budget
local t, i = {}, 0
while true do i = i + 1; t[i] = i end
function dispatch(s, hw)
  return { num_splits = 1 }
end
