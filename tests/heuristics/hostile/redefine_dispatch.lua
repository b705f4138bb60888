-- expect: dispatch must be pure: it assigned global 'dispatch'
-- line: 4
function dispatch(s, hw)
  dispatch = nil
  return { num_splits = 1 }
end
