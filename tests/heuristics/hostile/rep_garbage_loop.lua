-- expect: instruction budget
-- line: 3
while true do local s = ("x"):rep(60000) end -- megabytes of copying per hook period, charged as instructions
function dispatch(s, hw)
  return { num_splits = 1 }
end
