-- expect: string.rep result too large
-- line: 3
local s = string.rep("x", 1e9)
function dispatch(s, hw)
  return { num_splits = 1 }
end
