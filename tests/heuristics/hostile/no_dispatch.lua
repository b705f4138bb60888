-- expect: no dispatch function
local x = 1
