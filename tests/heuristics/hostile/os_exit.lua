-- expect: global 'os'
-- line: 3
os.exit(3)
function dispatch(s, hw)
  return { num_splits = 1 }
end
