-- expect: string longer than 65536 bytes refused
local s = "x"
while true do s = s .. s end
function dispatch(s, hw)
  return { num_splits = 1 }
end
