-- expect: global 'print'
-- line: 3
print("hello")
function dispatch(s, hw)
  return { num_splits = 1 }
end
