-- expect: refused at level 0
-- line: 4
function dispatch(s, hw)
  error("refused at level 0", 0)
end
