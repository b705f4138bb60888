-- expect: table.move range
-- line: 3
table.move({}, 1, 1e18, 1, {})
function dispatch(s, hw)
  return { num_splits = 1 }
end
