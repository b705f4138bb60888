-- expect: global 'rawset'
-- line: 3
rawset(string, "upper", nil)
function dispatch(s, hw)
  return { num_splits = 1 }
end
