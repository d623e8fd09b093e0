# Sourced by the tests/cli_*.sh scripts: a scratch folder $work (removed at exit), pass/fail
# counters and the checks they share; `finish` prints the closing "N passed, N failed" line
# and gives the exit status.
# NB_TEST_KEEP=DIR: $work's logs and JSON (not its weights) are copied into DIR before it is removed (a GPU
# machine's lease ends with the call; tools/device/check.sh).
work=$(mktemp -d)
case ${NB_TEST_KEEP:-} in "" | /*) ;; *) NB_TEST_KEEP=$PWD/$NB_TEST_KEEP ;; esac  # the copy runs from $work
keep_work() {
  [ -n "${NB_TEST_KEEP:-}" ] || return 0
  mkdir -p "$NB_TEST_KEEP/$(basename "$work")" &&
    (cd "$work" && find . -type f \( -name '*.log' -o -name '*.json' -o -name '*.jsonl' \) -print0 |
      xargs -0 -r cp --parents -t "$NB_TEST_KEEP/$(basename "$work")")
}
trap 'keep_work; rm -rf "$work"' EXIT
passed=0; failed=0
ok()   { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
# check "what" command...: passes when the command succeeds
check() { local what=$1; shift; if "$@"; then ok; else fail "$what"; fi; }
# expect_error "what" "pattern in stderr" command...: a non-zero exit whose stderr has the pattern
expect_error() {
  local what=$1 pattern=$2; shift 2
  "$@" >"$work/out" 2>"$work/err"; local rc=$?
  if [ $rc -eq 0 ]; then fail "$what: exit 0"; return; fi
  if grep -q -- "$pattern" "$work/err"; then ok; else fail "$what: stderr lacks '$pattern': $(cat "$work/err")"; fi
}
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; }
# wait_stopped PID LOG: the status of PID (a run just asked to stop), waited for at most 60 s. A run that ends
# through MPI_Abort (a stop on request over MPI, errorcode 3) can leave Open MPI 4.1's mpirun hanging after
# the ranks have ended ("ORTE_ERROR_LOG: Data unpack would read past end of buffer in file show_help.c",
# once in many runs, 2026-12-05): then it and its children are killed, saying so, and the caller goes on to
# check what the ranks wrote (LOG, the checkpoint).
wait_stopped() {
  local pid=$1 log=$2
  for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "  (still running 60 s after the stop request: killed; its log ends: $(tail -2 "$log" | tr '\n' ' '))"
    pkill -9 -P "$pid" 2>/dev/null; kill -9 "$pid" 2>/dev/null
  fi
  wait "$pid"
}
# A run folder's weights hash and training losses; same_run WHAT A B: both runs ended on the same weights
# and losses (bitwise).
hash_of() { sed -n 's/.*"weights_hash": "\([0-9a-f]*\)".*/\1/p' "$1/summary.json"; }
losses() { grep -o '"train_loss": [^,]*' "$1/metrics.jsonl"; }
same_run() {
  [ -n "$(hash_of "$2")" ] && [ "$(hash_of "$2")" = "$(hash_of "$3")" ] && [ "$(losses "$2")" = "$(losses "$3")" ] \
    && ok || fail "$1: weights '$(hash_of "$3")' and losses differ from '$(hash_of "$2")'"
}
# has_mpi BIN: mpirun is here and BIN's core links MPI (then Open MPI may run as root). mpi OUT NP ARGS...:
# `BIN train "${base[@]}" ARGS --transport mpi` on NP ranks (oversubscribed) into $work/OUT, logged to
# $work/OUT.log; a failure is the test's.
has_mpi() {
  command -v mpirun > /dev/null && ldd "$(dirname "$1")/nobubble-core" 2>/dev/null | grep -q libmpi || return 1
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}
mpi() {
  local out=$1 np=$2; shift 2
  timeout 180 env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" mpirun --oversubscribe --bind-to none \
    -np "$np" "$bin" train "${base[@]}" "$@" --transport mpi --out "$work/$out" > "$work/$out.log" 2>&1 \
    || fail "$out: $(tail -3 "$work/$out.log")"
}
# skip_without_gpu LOG FLAG_REFUSAL GPU_PATTERN WHAT: after a probe run of WHAT (LOG) failed, where there is no GPU:
# a build without CUDA must refuse naming -DNB_CUDA=ON and the flag (FLAG_REFUSAL, a line of its message), a CUDA
# build must say there is no usable GPU (GPU_PATTERN); then the test ends as skipped (77), or failed.
skip_without_gpu() {
  local log=$1 flag=$2 gpu=$3 what=$4
  if grep -q "no CUDA backend" "$log"; then
    grep -q -- "-DNB_CUDA=ON" "$log" && ok || fail "the refusal names -DNB_CUDA=ON: $(cat "$log")"
    grep -q "$flag" "$log" && ok || fail "the refusal names the flag"
  elif grep -q "$gpu" "$log"; then
    ok
  else
    fail "$what failed for another reason: $(tail -3 "$log")"
  fi
  echo "skipped: $(grep -m1 -i "cuda\|gpu" "$log")"
  finish > /dev/null || exit 1
  exit 77
}
# small_corpus BIN DIR [PARAGRAPHS]: a small prepared corpus (support/small_corpus.sh).
source "$(dirname "${BASH_SOURCE[0]}")/small_corpus.sh"
# render_dom FILE.html: the page as headless chromium parses it, into $work/dom.html; returns 1
# (writing nothing) when no chromium is installed. dom_has_ids ID...: one check per id.
render_dom() {
  local chrome
  chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
  [ -n "$chrome" ] || return 1
  timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --user-data-dir="$work/chrome" --dump-dom \
    "file://$1" > "$work/dom.html" 2> "$work/chrome.log"
  return 0
}
dom_has_ids() {
  local id
  for id in "$@"; do
    grep -q "id=\"$id\"" "$work/dom.html" && ok || fail "rendered page lacks #$id ($(wc -c < "$work/dom.html") bytes of DOM)"
  done
}
no_chromium="chromium is not installed: the report's rendering test needs it (bash scripts/setup.sh --test installs it)"
