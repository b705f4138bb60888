-- expect: first second
-- line: 4
function dispatch(s, hw)
  error("first\nsecond\n" .. string.rep("z", 5000))
end
