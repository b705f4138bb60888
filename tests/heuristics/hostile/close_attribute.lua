-- expect: non-closable value
-- line: 3
local lib <close> = math
function dispatch(s, hw)
  return { num_splits = 1 }
end
