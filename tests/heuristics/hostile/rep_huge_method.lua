-- expect: string.rep result too large
-- line: 3
local s = ("xyz"):rep(1e12)
function dispatch(s, hw)
  return { num_splits = 1 }
end
