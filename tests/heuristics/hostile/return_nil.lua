-- expect: got nil
-- line: 3
function dispatch(s, hw)
end
