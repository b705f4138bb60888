#!/usr/bin/env bash
# Renders real reports (a simulator search and a split sweep) in headless Chromium: a
# broken page shows blank, so the DOM must hold every panel and the plots, the console
# must stay free of errors, and the screenshot must show something.
# Usage: report_browser_test.sh EVODISPATCH_BINARY WORKDIR. Exit 77 (skip) without Chromium.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 EVODISPATCH_BINARY WORKDIR" >&2
  exit 2
fi
evodispatch=$1
workdir=$2
chromium=/usr/bin/chromium
panels=(panel-provenance panel-progress panel-speedup panel-curves panel-bandwidth panel-noise panel-rules)

if [[ ! -x $chromium ]]; then
  echo "SKIP: $chromium is missing (scripts/install-deps.sh installs it)"
  exit 77
fi

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

rm -rf "$workdir"
mkdir -p "$workdir"
cd "$workdir"

# --- the runs: a small simulator search (run 1) and a split sweep (run 2) ---------------
cat >cfg.json <<'EOF'
{"name": "browser-test", "workload": "paper-safety-160", "baseline": "fa3",
 "islands": {"count": 2, "batch": 8, "migration_interval": 5},
 "stop": {"max_evaluations": 300}}
EOF
"$evodispatch" search --config cfg.json --device sim:h100-sxm --db r.db --json >search.json ||
  fail "the search failed"
"$evodispatch" sweep splits --shape batch=1,seqlen_k=512,h_q=64,h_kv=1 --device sim:h100-sxm --db r.db >sweep.txt ||
  fail "the sweep failed"
"$evodispatch" results report --run 1 --db r.db --out report.html || fail "results report --run 1 failed"
"$evodispatch" results report --run 2 --db r.db --out sweep.html || fail "results report --run 2 failed"

# --- Chromium ----------------------------------------------------------------------------
# One fresh profile per call; `timeout` ends a Chromium that hangs.
chrome() {
  local profile
  profile=$(mktemp -d)
  local rc=0
  timeout 60 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --hide-scrollbars \
    --user-data-dir="$profile" --enable-logging=stderr --v=0 "$@" || rc=$?
  rm -rf "$profile"
  return $rc
}

# check_page PAGE NAME: dumps the DOM to NAME.dom (console to NAME.log) and screenshots NAME.png.
check_page() {
  local page=$1 name=$2
  chrome --dump-dom "file://$workdir/$page" >"$name.dom" 2>"$name.log" || fail "Chromium could not load $page (see $workdir/$name.log)"
  chrome --screenshot="$workdir/$name.png" --window-size=1280,4000 "file://$workdir/$page" \
    >/dev/null 2>>"$name.log" || fail "Chromium could not screenshot $page (see $workdir/$name.log)"

  local id
  for id in "${panels[@]}"; do
    grep -q "id=\"$id\"" "$name.dom" || fail "$page: the rendered DOM has no section $id"
  done
  if grep -q "Uncaught" "$name.log" || grep -i "CONSOLE" "$name.log" | grep -qi "error"; then
    grep -i -e "Uncaught" -e "CONSOLE" "$name.log" >&2 || true
    fail "$page: the console reports an error"
  fi
  [[ -f $name.png ]] || fail "$page: no screenshot"
  local size
  size=$(stat -c %s "$name.png")
  ((size > 20000)) || fail "$page: the screenshot is only $size bytes (a blank page?)"
}

# The text of one panel in a dumped DOM.
panel_of() {
  awk -v id="id=\"$2\"" 'index($0, id) { on = 1 } on { print } on && /<\/section>/ { exit }' \
    <(sed 's/<section/\n<section/g' "$1")
}

check_page report.html report
check_page sweep.html sweep
# Into a variable first: `grep -q` in a pipe would end it early, which pipefail reports.
speedup=$(panel_of report.dom panel-speedup)
[[ $speedup == *"<svg"* ]] || fail "report.html: the speedup panel draws no <svg>"
curves=$(panel_of sweep.dom panel-curves)
[[ $curves == *"<svg"* ]] || fail "sweep.html: the curves panel draws no <svg>"

echo "report: $workdir/report.html"
echo "screenshot: $workdir/report.png"
echo "sweep report: $workdir/sweep.html ($workdir/sweep.png)"
