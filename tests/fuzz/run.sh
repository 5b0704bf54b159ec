#!/usr/bin/env bash
# run.sh BUILD SECONDS NAME... -- `make fuzz`: for each harness, first its
# regression inputs (tests/fuzz/regress/NAME/*, each a crash once found, run
# once), then libFuzzer for SECONDS over a corpus seeded from the project's
# own files (examples, hardware files, test data, traces). A finding writes
# BUILD/fuzz/artifacts/NAME-crash-* (copy it into tests/fuzz/regress/NAME/
# once fixed) and fails the run.
set -u
BUILD=$1 SECONDS_EACH=$2
shift 2
seeds() { # NAME -> the files its corpus starts from
  case $1 in
    jin) ls workloads/examples/*.json hw_models/*.json tests/data/*.json tests/data/models/*.json \
            tests/data/hf/*.json tests/fuzz/seeds/trace/*.json ;;
    model) ls workloads/examples/*.json tests/data/models/*.json tests/data/hf/*.json tests/data/*.json ;;
    hw) ls hw_models/*.json tests/data/*.json ;;
    hlo) ls workloads/examples/*.hlo tests/data/hlo/*.hlo ;;
    trace) ls tests/fuzz/seeds/trace/*.json tests/data/*.json ;;
    runs) ls tests/validation/*.csv tests/data/*.csv ../shared/reference/public-runs*.csv ;;
    sweep) ls docs/studies/*.json tests/data/sweep/*.json ;;
  esac 2>/dev/null
}
TIMEOUT=10
# cpu_seconds BIN INPUT: whole seconds of CPU (user + system) that BIN
# takes on INPUT alone, rounded up
cpu_seconds() {
  local t TIMEFORMAT='%U %S'
  t=$( { time "$1" "$2" >/dev/null 2>&1; } 2>&1 | tail -1)
  awk -v t="$t" 'BEGIN { split(t, a, " "); s = a[1] + a[2]; printf "%d", s == int(s) ? s : int(s) + 1 }'
}
fail=0
for name in "$@"; do
  bin=$BUILD/fuzz/fuzz_$name corpus=$BUILD/fuzz/corpus/$name art=$BUILD/fuzz/artifacts
  mkdir -p "$corpus" "$art"
  seeds "$name" | while read -r f; do cp -n "$f" "$corpus/" 2>/dev/null; done
  if compgen -G "tests/fuzz/regress/$name/*" >/dev/null; then
    if ! "$bin" tests/fuzz/regress/"$name"/* >"$art/$name-regress.log" 2>&1; then
      echo "fuzz $name: a regression input fails again (see $art/$name-regress.log)"; fail=1; continue
    fi
  fi
  # -rss_limit_mb: the issue's bound on memory; -timeout: on one input's
  # time. libFuzzer's timeout is wall-clock, so on a loaded machine (make
  # fuzz runs niced beside builds) an input that takes 1 s can pass 10 s:
  # a timeout is run again alone and counts only if its CPU time is over
  # half the limit too; otherwise fuzzing resumes for the time left.
  left=$SECONDS_EACH runs=0 found=0 resumed=0
  while [ "$left" -gt 0 ] && [ "$found" -eq 0 ]; do
    start=$(date +%s)
    if "$bin" -max_total_time="$left" -timeout=$TIMEOUT -rss_limit_mb=2048 -max_len=65536 \
         -artifact_prefix="$art/$name-" -print_final_stats=1 "$corpus" >"$art/$name.log" 2>&1; then
      left=0
    else
      found=1
      slow=$(ls -t "$art/$name"-timeout-* 2>/dev/null | head -1)
      if [ -n "$slow" ] && grep -q "libFuzzer: timeout" "$art/$name.log" && [ "$resumed" -lt 5 ]; then
        cpu=$(cpu_seconds "$bin" "$slow")
        if [ "$cpu" -lt $((TIMEOUT / 2)) ]; then
          echo "fuzz $name: $(basename "$slow") passed ${TIMEOUT} s on the clock but takes ${cpu} s of CPU alone: the machine was loaded, not a finding; resuming"
          mv "$slow" "$art/load-$(basename "$slow")"
          found=0 resumed=$((resumed + 1))
        fi
      fi
      left=$((left - ($(date +%s) - start)))
    fi
    r=$(sed -n 's/^stat::number_of_executed_units: *//p' "$art/$name.log")
    runs=$((runs + ${r:-0}))
  done
  if [ "$found" -eq 0 ]; then
    echo "fuzz $name: $runs inputs in ${SECONDS_EACH} s, nothing found$([ "$resumed" -gt 0 ] && echo " (resumed $resumed times after timeouts under load)")"
  else
    echo "fuzz $name: FOUND a failure:"; grep -m3 -E "ERROR|SUMMARY|fuzz:" "$art/$name.log"; fail=1
  fi
done
exit $fail
