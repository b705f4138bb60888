-- expect: global 'package'
-- line: 3
local io = package.loaded.io
function dispatch(s, hw)
  return { num_splits = 1 }
end
