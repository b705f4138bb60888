-- expect: unexpected symbol
-- line: 4
function dispatch(s, hw)
  return { num_splits = }
end
