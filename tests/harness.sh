# The shell test harness tests/cli.sh and tests/sweep.sh source: counters,
# and checks on a command's exit status and output. The sourcing script sets
# TPUSIM (the binary, maybe with a prefix such as valgrind) and OUT (where
# each run's stdout and stderr go) first.
pass=0 fail=0

ok()   { pass=$((pass + 1)); }
bad()  { fail=$((fail + 1)); echo "FAIL: $*"; }

# run NAME EXPECTED_RC ARGS... ; leaves stdout/stderr in $OUT/NAME.{out,err}.
# Status 128 and above (a signal) or 99 (a sanitizer or valgrind error) is a
# crash whatever was expected.
run() {
  local name=$1 want=$2; shift 2
  $TPUSIM "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
  local rc=$?
  if [ "$rc" -ge 128 ] || [ "$rc" -eq 99 ]; then
    bad "$name: crashed or sanitizer/valgrind error (rc=$rc)"; cat "$OUT/$name.err"; return 1
  fi
  if [ "$rc" -ne "$want" ]; then
    bad "$name: exit $rc, expected $want"; cat "$OUT/$name.err"; return 1
  fi
  ok
}

# has NAME STREAM TEXT: the output contains TEXT (fixed string)
has() {
  if grep -qF -- "$3" "$OUT/$1.$2"; then ok; else bad "$1: $2 lacks '$3'"; sed 's/^/  | /' "$OUT/$1.$2" | head -5; fi
}
# empty NAME STREAM: the stream printed nothing
empty() {
  if [ ! -s "$OUT/$1.$2" ]; then ok; else bad "$1: $2 should be empty"; head -3 "$OUT/$1.$2"; fi
}
