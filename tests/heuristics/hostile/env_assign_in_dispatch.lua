-- expect: it assigned _ENV
-- line: 3
function dispatch(s, hw)
  _ENV = { dispatch = dispatch }
  return { num_splits = 1 }
end
