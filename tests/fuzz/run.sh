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
  esac 2>/dev/null
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
  # -rss_limit_mb: the bound on memory; -timeout: on one input's time
  if "$bin" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -artifact_prefix="$art/$name-" -print_final_stats=1 "$corpus" >"$art/$name.log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$art/$name.log")
    echo "fuzz $name: ${runs:-?} inputs in ${SECONDS_EACH} s, nothing found"
  else
    echo "fuzz $name: FOUND a failure:"; grep -m3 -E "ERROR|SUMMARY|fuzz:" "$art/$name.log"; fail=1
  fi
done
exit $fail
