-- expect: string longer than 65536 bytes refused
function dispatch(s, hw)
  local x = s.dtype
  while true do x = x .. x end
end
