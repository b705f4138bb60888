-- expect: sm_margin must be an integer in [0,
-- line: 3
function dispatch(s, hw)
  return { num_splits = 1, sm_margin = hw.num_sms }
end
