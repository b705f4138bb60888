-- expect: read-only table 'hw'
-- line: 4
function dispatch(s, hw)
  hw.num_sms = 1
  return { num_splits = 1 }
end
