-- expect: field 'num_kv_heads'
-- line: 4
function dispatch(s, hw)
  return { num_splits = s.num_kv_heads + 1 }
end
