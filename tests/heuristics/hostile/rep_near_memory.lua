-- expect: memory budget of 8388608 bytes exceeded
local t = {}
for i = 1, 1000 do t[i] = ("x"):rep(60000) .. i end -- 60 MB of distinct strings
function dispatch(s, hw)
  return { num_splits = 1 }
end
