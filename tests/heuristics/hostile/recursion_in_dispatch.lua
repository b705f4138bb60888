-- expect: budget of
-- Lua-to-Lua calls use no C stack; the memory budget ends this (the time budget on a starved machine).
local function depth(n) return depth(n + 1) + 1 end
function dispatch(s, hw)
  return { num_splits = depth(1) }
end
