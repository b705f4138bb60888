-- expect: index a string value
-- line: 3
("").rep = nil
function dispatch(s, hw)
  return { num_splits = 1 }
end
