-- expect: time budget
-- line: 5
local a = string.rep("x", 60000)
local b = string.rep("x", 60000)
while a == b do end -- each == is a memcmp the instruction count does not see
function dispatch(s, hw)
  return { num_splits = 1 }
end
