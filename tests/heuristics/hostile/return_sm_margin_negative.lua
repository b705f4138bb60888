-- expect: sm_margin must be an integer
-- line: 3
function dispatch(s, hw)
  return { num_splits = 1, sm_margin = -1 }
end
