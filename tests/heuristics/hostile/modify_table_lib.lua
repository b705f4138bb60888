-- expect: read-only table 'table'
-- line: 3
table.insert = nil
function dispatch(s, hw)
  return { num_splits = 1 }
end
