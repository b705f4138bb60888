-- expect: no dispatch function
local function dispatch(s, hw) return { num_splits = 1 } end
