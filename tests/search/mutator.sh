#!/bin/sh
# A stand-in for an LLM-backed external mutator, for the tests: it reads the JSON
# request on stdin and answers according to its first argument.
#   ok       a valid Lua dispatch script on stdout
#   garbage  text that is not Lua
#   slow     never answers in time (sleeps)
#   fail     a message on stderr, exit status 3
#   silent   exit 0 with nothing on stdout
# POSIX sh only: CI machines may have no python3.
mode=${1:-ok}
case "$mode" in
  slow) sleep 30 ;;
esac
cat > /dev/null
case "$mode" in
  ok)
    cat <<'LUA'
-- from tests/search/mutator.sh
function dispatch(s, hw)
  if s.nblk == 4 and s.batch * s.h_kv <= 16 then
    return { num_splits = 4, pack_gqa = true, sm_margin = 0 }
  end
  return { num_splits = 1, pack_gqa = true, sm_margin = 0 }
end
LUA
    ;;
  garbage) echo "this is not ((( lua" ;;
  fail) echo "mutator: out of ideas" >&2; exit 3 ;;
  silent) exit 0 ;;
  *) echo "mutator.sh: unknown mode $mode" >&2; exit 2 ;;
esac
