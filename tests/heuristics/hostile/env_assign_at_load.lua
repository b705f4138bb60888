-- expect: assigned _ENV
_ENV = {}
function dispatch(s, hw)
  return { num_splits = 1 }
end
