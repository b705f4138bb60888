-- expect: dispatch must be pure: it assigned global 'calls'
-- line: 4
function dispatch(s, hw)
  calls = 1
  return { num_splits = 1 }
end
