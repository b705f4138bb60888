-- expect: got 0.5
-- line: 3
function dispatch(s, hw)
  return { num_splits = 1, sm_margin = 0.5 }
end
