-- expect: instruction budget
-- line: 3
while true do end
