-- expect: global 'require'
-- line: 3
local io = require("io")
function dispatch(s, hw)
  return { num_splits = 1 }
end
