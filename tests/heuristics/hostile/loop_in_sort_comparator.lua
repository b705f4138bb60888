-- expect: instruction budget
-- line: 5
function dispatch(s, hw)
  local t = { 3, 1, 2 }
  table.sort(t, function(a, b) while true do end end)
  return { num_splits = t[1] }
end
