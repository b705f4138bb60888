-- expect: memory budget
local t = {}
while true do t[#t + 1] = ("x"):rep(1000) .. #t end
function dispatch(s, hw)
  return { num_splits = 1 }
end
