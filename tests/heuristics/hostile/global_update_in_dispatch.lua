-- expect: dispatch must be pure: it assigned global 'calls'
-- line: 5
calls = 0
function dispatch(s, hw)
  calls = calls + 1
  return { num_splits = 1 }
end
