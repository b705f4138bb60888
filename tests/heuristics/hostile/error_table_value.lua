-- expect: error object is a table value
-- line: 4
function dispatch(s, hw)
  error({ code = 1 })
end
