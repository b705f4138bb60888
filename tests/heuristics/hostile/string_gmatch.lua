-- expect: field 'gmatch'
-- line: 3
for w in string.gmatch("a b", "%a+") do end
function dispatch(s, hw)
  return { num_splits = 1 }
end
