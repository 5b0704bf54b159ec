#!/usr/bin/env bash
# `make bench`: points per second of `tpusim sweep` on a 1,000-point study
# (tests/bench/sweep-1000.json: mlp on 2 chips x 25 HBM x 5 ICI bandwidths x
# 4 chip counts), on 1 and 2 ranks under mpirun when tpusim was built with
# MPI (TPUSIM_MPI=1), else on 1 and 2 threads; the scaling efficiency is the
# 2-way rate over twice the 1-way one. The outputs must be the same bytes.
set -u
TPUSIM=${TPUSIM:-./tpusim}
STUDY=tests/bench/sweep-1000.json
OUT=tests/out/bench-sweep
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# run N -> points per second on N ranks (or threads); output in $OUT/N.*
rate() {
  local n=$1 t0 t1
  t0=$(date +%s.%N)
  if [ "${TPUSIM_MPI:-0}" = 1 ] && command -v mpirun >/dev/null; then
    mpirun -n "$n" --oversubscribe $TPUSIM sweep $STUDY --out "$OUT/$n" --threads 1 >/dev/null || return 1
  else
    $TPUSIM sweep $STUDY --out "$OUT/$n" --threads "$n" >/dev/null || return 1
  fi
  t1=$(date +%s.%N)
  awk -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.1f", 1000 / (t1 - t0) }'
}

how=threads
[ "${TPUSIM_MPI:-0}" = 1 ] && command -v mpirun >/dev/null && how="MPI ranks (1 thread each)"
r1=$(rate 1) || { echo "sweep bench: the 1-way run failed"; exit 1; }
r2=$(rate 2) || { echo "sweep bench: the 2-way run failed"; exit 1; }
cmp -s "$OUT/1.csv" "$OUT/2.csv" && cmp -s "$OUT/1.jsonl" "$OUT/2.jsonl" ||
  { echo "sweep bench: 1- and 2-way outputs differ"; exit 1; }
echo "sweep: 1000 points on 1 and 2 $how: $r1 and $r2 points/s," \
  "scaling efficiency $(awk -v a="$r1" -v b="$r2" 'BEGIN { printf "%.0f%%", 100 * b / (2 * a) }')" \
  "($(nproc) cores, shared with whatever else runs)"
