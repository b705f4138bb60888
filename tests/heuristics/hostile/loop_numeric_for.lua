-- expect: instruction budget
for i = 1, math.huge do end
function dispatch(s, hw)
  return { num_splits = 1 }
end
