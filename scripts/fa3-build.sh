#!/usr/bin/env bash
# Builds FlashAttention-3 (FA3, flash-attention/hopper) on the GPU machine: forward only, bf16 (and
# with --fp8 e4m3) only, at the requested head dims, with split-KV, paged KV, PackGQA and varlen kept enabled. FA3 is never
# committed: the sources come from a user's checkout or from third_party/fa3-src.tar.xz (git-ignored).
#
# Usage:
#   scripts/fa3-build.sh CHECKOUT OUT_DIR [--patch FILE] [--hdims "64 128 256"] [--reuse DIR]
#                        [--namespace NAME] [--fp8] [--dry-run]
#
#   CHECKOUT   a flash-attention checkout (a directory holding hopper/ and csrc/cutlass/include/), or a
#              .tar.xz holding such a tree (e.g. third_party/fa3-src.tar.xz; extracted to a temp dir).
#              The checkout is never modified: hopper/ and csrc/cutlass/include/ are copied.
#   OUT_DIR    where the finished tree goes (replaced if it is an earlier output of this script).
#              It ends up with hopper/ (sources + the built extension), csrc/, build.log, BUILD_ID.
#   --patch F  a `git diff`-style patch with paths relative to the flash-attention root
#              (a/hopper/flash_api_stable.cpp, b/hopper/evodispatch_heuristic.h, ...), applied with git apply.
#              NB: with torch >= 2.9 setup.py compiles hopper/flash_api_stable.cpp, NOT hopper/flash_api.cpp.
#   --hdims H  head dims to build, from 64 96 128 192 256 (default "128").
#   --reuse D  a finished earlier OUT_DIR (e.g. the stock build): its objects are reused so that ninja only
#              rebuilds what the patch (or a different checkout) changed.
#   --namespace NAME  the build's torch op namespace and Python package instead of flash_attn_3
#              (NAME._C, torch.ops.NAME, NAME_config), so that it loads beside stock FA3 in one process:
#              how fa3_worker.py --regress times a patched build against stock. Written to OUT_DIR/NAMESPACE.
#   --fp8      build FA3's e4m3 kernels too (q, k and v in e4m3, as the FA3 worker runs an fp8 cache):
#              about twice the kernels to compile.
#   --dry-run  do the copy / patch / setup.py edit / env setup, print them, and stop before setup.py.
#
# Environment: FA3_BUILD_ROOT (default /tmp/fa3-build-root) is the fixed path every build runs in before
# it is moved to OUT_DIR. torch's ninja file holds absolute paths, so objects can only be reused by a
# build that runs at the same path; --reuse picks the root its DIR was built in. MAX_JOBS defaults to
# the core count, NVCC_THREADS to 2.
#
# Use the result from Python (PYTHONPATH=OUT_DIR/hopper):
#   sys.path.insert(0, "OUT_DIR/hopper"); import flash_attn_interface   # loads flash_attn_3._C (or NAME._C)
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit "${1:-2}"; }
die() { echo "fa3-build: error: $*" >&2; exit 1; }
log() { echo "fa3-build: $*" >&2; }

T0=$(date +%s)
CHECKOUT="" OUT_DIR="" PATCH="" HDIMS="128" REUSE="" DRY_RUN=0 NAMESPACE=flash_attn_3 FP8=0
while (($#)); do
  case "$1" in
    --patch) PATCH=${2:?--patch needs a file}; shift 2 ;;
    --hdims) HDIMS=${2:?--hdims needs a list}; shift 2 ;;
    --reuse) REUSE=${2:?--reuse needs a directory}; shift 2 ;;
    --namespace) NAMESPACE=${2:?--namespace needs a name}; shift 2 ;;
    --fp8) FP8=1; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h|--help) usage 0 ;;
    -*) die "unknown option $1" ;;
    *) if [[ -z $CHECKOUT ]]; then CHECKOUT=$1; elif [[ -z $OUT_DIR ]]; then OUT_DIR=$1; else usage; fi; shift ;;
  esac
done
[[ -n $CHECKOUT && -n $OUT_DIR ]] || usage

abspath() { python3 -c 'import os,sys; print(os.path.abspath(sys.argv[1]))' "$1"; }
CHECKOUT=$(abspath "$CHECKOUT"); OUT_DIR=$(abspath "$OUT_DIR")
[[ -z $PATCH ]] || { [[ -f $PATCH ]] || die "no patch file $PATCH"; PATCH=$(abspath "$PATCH"); }
[[ -z $REUSE ]] || { [[ -d $REUSE ]] || die "no reuse dir $REUSE"; REUSE=$(abspath "$REUSE"); }
[[ $NAMESPACE =~ ^[a-z_][a-z0-9_]*$ ]] || die "--namespace $NAMESPACE: a lowercase Python identifier is required"

# Head dims: validated, sorted, deduplicated.
ALL_HDIMS=(64 96 128 192 256)
read -r -a req <<<"$HDIMS"
((${#req[@]})) || die "--hdims is empty"
for h in "${req[@]}"; do [[ " ${ALL_HDIMS[*]} " == *" $h "* ]] || die "unsupported head dim $h (one of ${ALL_HDIMS[*]})"; done
HDIMS=$(printf '%s\n' "${req[@]}" | sort -n -u | tr '\n' ' '); HDIMS=${HDIMS% }

# FLASH_ATTENTION_DISABLE_* read by hopper/setup.py: BACKWARD SPLIT PAGEDKV APPENDKV LOCAL SOFTCAP PACKGQA
# FP16 FP8 VARLEN CLUSTER HDIM64 HDIM96 HDIM128 HDIM192 HDIM256 SM80 HDIMDIFF64 HDIMDIFF192.
# Kept enabled: SPLIT PAGEDKV PACKGQA VARLEN (and bf16 forward at the requested head dims; FP8 with --fp8).
DISABLE=(BACKWARD FP16 SOFTCAP LOCAL CLUSTER SM80 APPENDKV HDIMDIFF64 HDIMDIFF192)
((FP8)) || DISABLE+=(FP8)
for h in "${ALL_HDIMS[@]}"; do [[ " $HDIMS " == *" $h "* ]] || DISABLE+=("HDIM$h"); done
mapfile -t DISABLE_VARS < <(printf 'FLASH_ATTENTION_DISABLE_%s\n' "${DISABLE[@]}" | sort)

# ---- Sources --------------------------------------------------------------------------------------
TMP=$(mktemp -d "${TMPDIR:-/tmp}/fa3-build.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
if [[ -f $CHECKOUT ]]; then
  [[ $CHECKOUT == *.tar.xz || $CHECKOUT == *.txz ]] || die "$CHECKOUT: a file must be a .tar.xz"
  log "extracting $CHECKOUT"
  tar -xJf "$CHECKOUT" -C "$TMP"
  SETUP=$(find "$TMP" -maxdepth 3 -path '*/hopper/setup.py' -print -quit)
  [[ -n $SETUP ]] || die "$CHECKOUT holds no */hopper/setup.py"
  SRC=$(dirname "$(dirname "$SETUP")")
elif [[ -d $CHECKOUT ]]; then
  SRC=$CHECKOUT
else
  die "no checkout $CHECKOUT"
fi
[[ -f $SRC/hopper/setup.py ]] || die "$CHECKOUT: no hopper/setup.py"
[[ -d $SRC/csrc/cutlass/include/cute ]] || die "$CHECKOUT: no csrc/cutlass/include (cutlass submodule not checked out?)"
if [[ -f $SRC/FA3_COMMIT ]]; then FA3_COMMIT=$(tr -d '[:space:]' <"$SRC/FA3_COMMIT")
elif FA3_COMMIT=$(git -C "$SRC" rev-parse HEAD 2>/dev/null); then :
else FA3_COMMIT=unknown000000; log "warning: no FA3_COMMIT file and not a git checkout"; fi

# ---- Identity: the commit, the switches, the head dims, the patch and the namespace -----------------
PATCH_SHA=none; [[ -z $PATCH ]] || PATCH_SHA=$(sha256sum "$PATCH" | cut -c1-12)
CFG_HASH=$({ printf '%s\n' "${DISABLE_VARS[@]}"; echo "hdims=$HDIMS"; [[ -z $PATCH ]] || cat "$PATCH"
             [[ $NAMESPACE == flash_attn_3 ]] || echo "namespace=$NAMESPACE"; } | sha256sum | cut -c1-12)
BUILD_ID="fa3-${FA3_COMMIT:0:12}-$CFG_HASH"

report() {  # the lines a caller reads: identity, time, extension, how to import it
  echo "fa3-build: BUILD_ID $BUILD_ID"
  echo "fa3-build: done in $(($(date +%s) - T0)) s"
  echo "fa3-build: extension $1"
  echo "fa3-build: use PYTHONPATH=$OUT_DIR/hopper (python: sys.path.insert(0, '$OUT_DIR/hopper'); import flash_attn_interface)"
}

# The same inputs make the same build: a finished OUT_DIR of this identity is kept. One of another
# identity (another patch, other head dims) is rebuilt, never taken for this one.
if ((!DRY_RUN)) && [[ -f $OUT_DIR/BUILD_ID && $(cat "$OUT_DIR/BUILD_ID") == "$BUILD_ID" ]]; then
  SO=$(find "$OUT_DIR/hopper/$NAMESPACE" -maxdepth 1 -name '_C*.so' -print -quit 2>/dev/null || true)
  if [[ -n $SO ]]; then
    log "$OUT_DIR already holds build $BUILD_ID: kept"
    report "$SO"
    exit 0
  fi
fi

# ---- Build root (fixed path, so a --reuse'd ninja tree stays valid) ---------------------------------
MARK=.fa3-build-tree
if [[ -n $REUSE ]]; then
  [[ -f $REUSE/$MARK ]] || die "$REUSE was not made by fa3-build.sh"
  [[ -f $REUSE/BUILD_ID ]] || die "$REUSE is not a finished build (no BUILD_ID)"
  REUSE_ROOT=$(cat "$REUSE/$MARK")
  if [[ -z ${FA3_BUILD_ROOT:-} ]]; then FA3_BUILD_ROOT=$REUSE_ROOT
  elif [[ $FA3_BUILD_ROOT != "$REUSE_ROOT" ]]; then
    log "warning: $REUSE was built in $REUSE_ROOT, not FA3_BUILD_ROOT=$FA3_BUILD_ROOT: ninja will rebuild everything"
  fi
fi
ROOT=$(abspath "${FA3_BUILD_ROOT:-/tmp/fa3-build-root}")
[[ $ROOT != / && $ROOT != "$OUT_DIR" && $ROOT != "$SRC" && $ROOT != "$REUSE" ]] || die "bad FA3_BUILD_ROOT $ROOT"
mkdir -p "$(dirname "$ROOT")"
exec 9>"$ROOT.lock"
command -v flock >/dev/null && { flock -n 9 || { log "waiting for another build in $ROOT"; flock 9; }; }
if [[ -e $ROOT ]]; then [[ -f $ROOT/$MARK ]] || die "$ROOT exists and is not a fa3-build tree"; rm -rf "$ROOT"; fi
if [[ -e $OUT_DIR && -n $(ls -A "$OUT_DIR") && ! -f $OUT_DIR/$MARK ]]; then
  die "$OUT_DIR exists, is not empty and is not an earlier fa3-build.sh output"
fi

if [[ -n $REUSE ]]; then
  log "reusing $REUSE"
  cp -a "$REUSE" "$ROOT"       # -a keeps mtimes: objects stay newer than unchanged sources
  rm -f "$ROOT/BUILD_ID" "$ROOT/build.log"
else
  mkdir -p "$ROOT"
fi
echo "$ROOT" >"$ROOT/$MARK"

# Remember the reused sources (content + mtime): a file that ends up with the same content after the
# sync and the patch gets its old mtime back, so ninja does not rebuild what did not change.
mtimes() {  # save|restore DIR FILE
  python3 - "$@" <<'EOF'
import hashlib, json, os, sys
mode, root, store = sys.argv[1:4]
def files():
    for sub in ("hopper", "csrc"):
        for base, dirs, fs in os.walk(os.path.join(root, sub)):
            dirs[:] = [d for d in dirs if d not in ("build", "__pycache__")]
            for f in fs:
                p = os.path.join(base, f)
                if os.path.isfile(p) and not os.path.islink(p):
                    yield os.path.relpath(p, root), p
def digest(p): return hashlib.sha256(open(p, "rb").read()).hexdigest()
if mode == "save":
    json.dump({r: [digest(p), os.stat(p).st_mtime_ns] for r, p in files()}, open(store, "w"))
else:
    old, n = json.load(open(store)), 0
    for r, p in files():
        if r in old and old[r][0] == digest(p) and os.stat(p).st_mtime_ns != old[r][1]:
            os.utime(p, ns=(old[r][1], old[r][1])); n += 1
    print(f"fa3-build: {n} files back to their reused mtime (content unchanged)", file=sys.stderr)
EOF
}
[[ -z $REUSE ]] || mtimes save "$ROOT" "$TMP/reused-mtimes.json"

# Mirror SRC's sources into ROOT. A file is rewritten (fresh mtime, so ninja rebuilds its dependants)
# only if its content differs; files not in SRC are removed, except build outputs.
python3 - "$SRC" "$ROOT" <<'EOF'
import filecmp, os, shutil, sys
src, dst = sys.argv[1:3]
def generated(rel):  # build outputs under hopper/: never copied, never removed
    parts = rel.split(os.sep)
    return (parts[0] in ("build", "dist", ".git") or "__pycache__" in parts or parts[0].endswith(".egg-info")
            or rel.endswith(".so") or rel == "flash_attn_config.py")
def sync(s, d, skip):
    os.makedirs(d, exist_ok=True)
    seen, changed = set(), 0
    for base, dirs, files in os.walk(s):
        for f in files:
            rel = os.path.relpath(os.path.join(base, f), s)
            if skip(rel): continue
            seen.add(rel)
            a, b = os.path.join(s, rel), os.path.join(d, rel)
            if os.path.isfile(b) and filecmp.cmp(a, b, shallow=False): continue
            os.makedirs(os.path.dirname(b), exist_ok=True)
            if os.path.lexists(b): os.remove(b)
            shutil.copyfile(a, b); shutil.copymode(a, b); changed += 1
    removed = 0
    for base, dirs, files in os.walk(d):
        for f in files:
            rel = os.path.relpath(os.path.join(base, f), d)
            if rel not in seen and not skip(rel): os.remove(os.path.join(d, rel)); removed += 1
    print(f"fa3-build: {os.path.relpath(d, dst)}: {len(seen)} files, {changed} written, {removed} removed", file=sys.stderr)
sync(os.path.join(src, "hopper"), os.path.join(dst, "hopper"), generated)
sync(os.path.join(src, "csrc", "cutlass", "include"), os.path.join(dst, "csrc", "cutlass", "include"), lambda r: False)
for f in ("README.md", "LICENSE", "FA3_COMMIT"):   # setup.py reads ../README.md
    a, b = os.path.join(src, f), os.path.join(dst, f)
    if os.path.isfile(a):
        if not (os.path.isfile(b) and filecmp.cmp(a, b, shallow=False)): shutil.copyfile(a, b)
    elif f == "README.md":
        open(b, "w").write("FlashAttention-3 (offline build)\n")
EOF
[[ -f $ROOT/FA3_COMMIT ]] || echo "$FA3_COMMIT" >"$ROOT/FA3_COMMIT"

# ---- Patch ------------------------------------------------------------------------------------------
if [[ -n $PATCH ]]; then
  # ROOT gets its own (empty) repository so that git apply resolves paths from ROOT, whatever encloses it.
  [[ -d $ROOT/.git ]] || git -C "$ROOT" init -q
  (cd "$ROOT" && git apply --check "$PATCH") || die "patch $PATCH does not apply to $CHECKOUT"
  (cd "$ROOT" && git apply --whitespace=nowarn --verbose "$PATCH") >&2
  if grep -q '^+++ b/hopper/flash_api\.cpp' "$PATCH" && ! grep -q '^+++ b/hopper/flash_api_stable\.cpp' "$PATCH"; then
    log "warning: the patch changes hopper/flash_api.cpp only; with torch >= 2.9 setup.py compiles flash_api_stable.cpp instead"
  fi
fi

# ---- Namespace: torch.ops.NAME and the package NAME, so the build loads beside stock FA3 ----------------
if [[ $NAMESPACE != flash_attn_3 ]]; then
  python3 - "$ROOT/hopper" "$NAMESPACE" <<'EOF' || die "cannot rename FA3's namespace to $NAMESPACE in $CHECKOUT"
import os, re, shutil, sys
hopper, ns = sys.argv[1:3]
def rewrite(name, pattern, repl, required):
    p = os.path.join(hopper, name)
    if not os.path.isfile(p):
        if required: sys.exit(f"fa3-build: error: no hopper/{name}")
        return 0
    s = open(p).read()
    s2, n = re.subn(pattern, repl, s, flags=re.M)
    if n == 0 and required: sys.exit(f"fa3-build: error: hopper/{name} does not name flash_attn_3 where expected")
    if s2 != s: open(p, "w").write(s2)
    return n
ops = r"\b((?:STABLE_)?TORCH_LIBRARY(?:_IMPL)?)\(flash_attn_3\b"
n = rewrite("flash_api_stable.cpp", ops, r"\1(" + ns, False) + rewrite("flash_api.cpp", ops, r"\1(" + ns, False)
if n == 0: sys.exit("fa3-build: error: no TORCH_LIBRARY(flash_attn_3, ...) in hopper/flash_api*.cpp")
rewrite("setup.py", r'^PACKAGE_NAME = "flash_attn_3"$', f'PACKAGE_NAME = "{ns}"', True)
rewrite("flash_attn_interface.py", r"\bflash_attn_3\b(?! as )", ns, True)  # not aiter's module (ROCm)
rewrite("flash_attn_interface.py", r"\bflash_attn_config\b", ns + "_config", False)
# The package moves: a flash_attn_3/ left here (with a reused stock _C.so) would shadow stock FA3's.
old, new = os.path.join(hopper, "flash_attn_3"), os.path.join(hopper, ns)
if os.path.isdir(old):
    if not os.path.isdir(new): shutil.copytree(old, new, ignore=shutil.ignore_patterns("*.so"))
    shutil.rmtree(old)
print(f"fa3-build: namespace {ns}: {n} torch library registrations renamed", file=sys.stderr)
EOF
fi

# ---- setup.py: no `git submodule update` on the offline machine -------------------------------------
python3 - "$ROOT/hopper/setup.py" <<'EOF'
import re, sys
p = sys.argv[1]; s = open(p).read()
pat = re.compile(r'^([ \t]*)subprocess\.run\(\[\s*"git",\s*"submodule",\s*"update"[^\n]*$', re.M)
s2, n = pat.subn(r'\1pass  # fa3-build.sh: offline, csrc/cutlass is already in place', s)
if n == 0 and "fa3-build.sh: offline" not in s:
    sys.exit("fa3-build: error: setup.py has no `git submodule update` line to replace")
if s2 != s: open(p, "w").write(s2)
EOF

[[ -z $REUSE ]] || mtimes restore "$ROOT" "$TMP/reused-mtimes.json"

# ---- Environment ------------------------------------------------------------------------------------
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^FLASH_ATTENTION_(DISABLE_|ENABLE_VCOLMAJOR$)' || true)
for v in "${DISABLE_VARS[@]}"; do export "$v=TRUE"; done
export MAX_JOBS=${MAX_JOBS:-$(nproc)} NVCC_THREADS=${NVCC_THREADS:-2}

{
  echo "fa3-build: checkout   $CHECKOUT (FA3 commit $FA3_COMMIT)"
  echo "fa3-build: build root $ROOT -> $OUT_DIR"
  echo "fa3-build: hdims      $HDIMS; patch ${PATCH:-none} (sha256 $PATCH_SHA); reuse ${REUSE:-none}; namespace $NAMESPACE"
  echo "fa3-build: env        MAX_JOBS=$MAX_JOBS NVCC_THREADS=$NVCC_THREADS"
  env | grep -E '^FLASH_ATTENTION_' | sort | sed 's/^/fa3-build: env        /'
  echo "fa3-build: setup.py   $(grep -n 'fa3-build.sh: offline' "$ROOT/hopper/setup.py")"
  echo "fa3-build: BUILD_ID   $BUILD_ID"
} >&2

finish() {  # move the tree from ROOT to OUT_DIR
  rm -rf "$OUT_DIR"; mkdir -p "$(dirname "$OUT_DIR")"; mv "$ROOT" "$OUT_DIR"
  echo "$NAMESPACE" >"$OUT_DIR/NAMESPACE"
}

if ((DRY_RUN)); then
  log "dry run: would run (in $OUT_DIR/hopper): python3 setup.py build_ext --inplace --force > $OUT_DIR/build.log 2>&1"
  finish
  log "dry run: prepared tree in $OUT_DIR ($(($(date +%s) - T0)) s)"
  exit 0
fi

# ---- Build ------------------------------------------------------------------------------------------
python3 - <<'EOF' || die "the build needs torch, packaging, wheel, setuptools and ninja in python3"
import torch, packaging, setuptools, wheel.bdist_wheel
from torch.utils.cpp_extension import CUDA_HOME, is_ninja_available
print(f"fa3-build: torch {torch.__version__} (CUDA {torch.version.cuda}), CUDA_HOME {CUDA_HOME}, ninja {is_ninja_available()}")
if not is_ninja_available(): print("fa3-build: warning: no ninja: slow, serial, non-incremental build")
EOF
log "building (log: $OUT_DIR/build.log)"
# --force: distutils would otherwise skip the extension when only headers changed (it compares the
# sources' mtimes with build/lib*/…so); ninja still recompiles only the objects that are out of date.
if ! (cd "$ROOT/hopper" && python3 setup.py build_ext --inplace --force) >"$ROOT/build.log" 2>&1; then
  finish
  tail -n 80 "$OUT_DIR/build.log" >&2
  die "build failed after $(($(date +%s) - T0)) s; full log: $OUT_DIR/build.log"
fi
finish
echo "$BUILD_ID" >"$OUT_DIR/BUILD_ID"
# setup.py writes flash_attn_config.py; a renamed interface imports it as NAME_config.
[[ $NAMESPACE == flash_attn_3 || ! -f $OUT_DIR/hopper/flash_attn_config.py ]] ||
  cp "$OUT_DIR/hopper/flash_attn_config.py" "$OUT_DIR/hopper/${NAMESPACE}_config.py"

SO=$(find "$OUT_DIR/hopper/$NAMESPACE" -maxdepth 1 -name '_C*.so' -print -quit)
[[ -n $SO ]] || die "no $NAMESPACE/_C*.so in $OUT_DIR/hopper after the build"
log "smoke test: import flash_attn_interface ($NAMESPACE._C)"
python3 -c 'import importlib, sys; sys.path.insert(0, sys.argv[1]); import flash_attn_interface; m = importlib.import_module(sys.argv[2] + "._C"); print("fa3-build: imported", flash_attn_interface.__file__, m.__file__)' \
  "$OUT_DIR/hopper" "$NAMESPACE" || die "smoke test failed: could not import flash_attn_interface from $OUT_DIR/hopper"
STEPS=$(grep -oE '^\[[0-9]+/[0-9]+\]' "$OUT_DIR/build.log" | tail -n 1 || true)
log "ninja steps run: ${STEPS:-none (no work to do)}"
report "$SO"
