-- expect: budget of
-- Lua-to-Lua calls use no C stack; the memory budget ends this (the time budget on a starved machine).
local function f(n) return 1 + f(n + 1) end
f(1)
function dispatch(s, hw)
  return { num_splits = 1 }
end
