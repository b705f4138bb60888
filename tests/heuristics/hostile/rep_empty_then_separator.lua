-- expect: string.rep result too large
-- line: 4
local e = string.rep("", 1e18) -- returns "" at once instead of looping 1e18 times
local s = string.rep(e, 1e18, ",")
function dispatch(s, hw)
  return { num_splits = 1 }
end
