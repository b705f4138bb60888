-- expect: stack overflow
local function f()
  table.sort({ 2, 1 }, function(a, b) f() return a < b end)
end
f()
function dispatch(s, hw)
  return { num_splits = 1 }
end
