-- expect: pack_gqa must be a boolean, got 1
-- line: 3
function dispatch(s, hw)
  return { num_splits = 1, pack_gqa = 1 }
end
