-- expect: global 'setmetatable'
-- line: 3
setmetatable(_ENV, nil)
function dispatch(s, hw)
  return { num_splits = 1 }
end
