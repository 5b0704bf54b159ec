#!/bin/bash
# calculon-compare.sh -- the same parallel-plan search in tpusim and in
# NVIDIA's Calculon (github.com/calculon-ai/calculon), side by side: plans
# evaluated per second, wall time, and each tool's best plan evaluated by
# both tools (tpusim simulates Calculon's best through `tpusim simulate`;
# Calculon evaluates tpusim's best through its `llm` command with an
# execution JSON written here).
#
# Usage: tools/calculon-compare.sh [--markdown] [CASE...]
#   CASE: 175b (gpt3-175b on 1024 h100-sxm, global batch 1536) and 22b
#         (Megatron 22B of Korthikanti et al. 2022 on 64 a100-80g, global
#         batch 512); both when none is named.
# Environment:
#   TPUSIM           the binary (default ./tpusim)
#   CALCULON         a checkout of calculon-ai/calculon; without it only
#                    tpusim's side is printed
#   CALCULON_PYTHON  the Python with numpy, pandas and psutil that Calculon
#                    needs (default python3)
#   CALCULON_CPUS    Calculon's worker processes (default: every core)
# Calculon runs with -m (--mbs-break, as its README's optimizer example):
# a micro-batch sweep stops at the first size with no valid execution;
# without it the 22B case alone is 3.9 M executions (hours here).
# --markdown prints the tables as Markdown with the date, the commits and
# the commands (what docs/calculon.md holds; regenerate it with
# `tools/calculon-compare.sh --markdown > docs/calculon.md`).
#
# Calculon's code is not part of tpusim; this script only runs it.
set -euo pipefail

TPUSIM=${TPUSIM:-./tpusim}
PY=${CALCULON_PYTHON:-python3}
CPUS=${CALCULON_CPUS:-$(nproc)}
MARKDOWN=0
CASES=()
for a in "$@"; do
  case "$a" in
    --markdown) MARKDOWN=1 ;;
    175b|22b) CASES+=("$a") ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "calculon-compare.sh: unknown argument '$a'; expected 175b, 22b or --markdown" >&2; exit 2 ;;
  esac
done
[ ${#CASES[@]} -eq 0 ] && CASES=(175b 22b)
[ -x "$TPUSIM" ] || { echo "calculon-compare.sh: no tpusim binary at $TPUSIM (run make tpusim, or set TPUSIM)" >&2; exit 1; }
if [ -n "${CALCULON:-}" ] && [ ! -x "$CALCULON/bin/calculon" ]; then
  echo "calculon-compare.sh: CALCULON=$CALCULON has no bin/calculon; expected a checkout of calculon-ai/calculon" >&2
  exit 1
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# Korthikanti et al. 2022 (arXiv:2205.05198) Table 3's 22B: 48 layers,
# hidden 6144, 64 heads, sequence 2048, vocabulary 51200.
cat > "$WORK/megatron-22b.json" <<'J'
{ "name": "megatron-22b", "family": "transformer",
  "description": "Megatron 22B (Korthikanti et al. 2022, Table 3)",
  "layers": 48, "hidden": 6144, "heads": 64, "kv_heads": 64, "ffn_hidden": 24576,
  "ffn": "gelu", "norm": "layernorm", "bias": true, "positions": "learned", "max_positions": 2048,
  "vocab": 51200, "seq_len": 2048, "tied_embeddings": true,
  "train": {"global_batch": 512, "precision": "bf16", "optimizer": "adam"} }
J

# case -> tpusim model, hardware, chips, batch; Calculon model and system
case_args() {
  case "$1" in
    175b) echo "gpt3-175b h100-sxm 1024 1536 models/gpt3-175B.json systems/h100_80g_nvl8.json" ;;
    22b) echo "$WORK/megatron-22b.json a100-80g 64 512 models/megatron-22B.json systems/a100_80g.json" ;;
  esac
}

now() { date +%s.%N; }

# The helper that reads and writes the JSON of both tools (stdlib only).
cat > "$WORK/j.py" <<'P'
import json, sys
cmd = sys.argv[1]
if cmd == "tpusim-best":        # plan --json -> simulate flags, one line
    b = json.load(open(sys.argv[2]))["best"]; p = b["plan"]
    flags = ["--dp", p["dp"], "--tp", p["tp"], "--pp", p["pp"], "--mbs", p["mbs"],
             "--zero", p["zero"], "--recompute", p["recompute"]]
    if p.get("vp", 1) > 1: flags += ["--pp-schedule", "interleaved:%d" % p["vp"]]
    if p.get("sp"): flags += ["--sp"]
    print(" ".join(str(x) for x in flags))
elif cmd == "field":             # a field of a JSON file: key.key
    o = json.load(open(sys.argv[2]))
    for k in sys.argv[3].split("."):
        o = o[k] if not isinstance(o, list) else o[int(k)]
    print(o)
elif cmd == "calculon-exe":      # tpusim's best -> a Calculon execution
    j = json.load(open(sys.argv[2])); p = j["best"]["plan"]; chips = j["best"]["chips"]
    vp = p.get("vp", 1)
    rec = {"none": "none", "selective": "attn_only", "full": "full"}[p["recompute"]]
    sp = bool(p.get("sp", p["tp"] > 1))
    exe = {"num_procs": chips, "tensor_par": p["tp"], "pipeline_par": p["pp"], "data_par": p["dp"],
           "tensor_par_net": 0, "pipeline_par_net": 1 if p["pp"] > 1 else 0,
           "data_par_net": 1 if p["dp"] > 1 else 0,
           "batch_size": p["gbs"], "microbatch_size": p["mbs"], "datatype": sys.argv[3],
           "fused_activation": True, "attention_type": "multihead",
           "activation_recompute": rec, "pipeline_interleaving": vp,
           "optimizer_sharding": p["zero"] >= 1 and p["dp"] > 1,
           "tensor_par_comm_type": "rs_ag" if sp else "ar", "tensor_par_overlap": "none",
           "seq_par_ag_redo": sp and rec == "attn_only", "data_par_overlap": p["dp"] > 1,
           "weight_offload": False, "activations_offload": False, "optimizer_offload": False,
           "training": True}
    json.dump(exe, open(sys.argv[4], "w"), indent=1)
elif cmd == "calculon-best":     # Calculon's optimal-execution output -> simulate flags
    e = json.load(open(sys.argv[2]))["0"]["execution"]
    rec = {"none": "none", "attn_only": "selective", "full": "full"}[e["activation_recompute"]]
    flags = ["--dp", e["data_par"], "--tp", e["tensor_par"], "--pp", e["pipeline_par"],
             "--mbs", e["microbatch_size"], "--zero", 1 if e["optimizer_sharding"] else 0,
             "--recompute", rec]
    if e["pipeline_interleaving"] > 1: flags += ["--pp-schedule", "interleaved:%d" % e["pipeline_interleaving"]]
    if e["tensor_par_comm_type"] != "ar" and e["tensor_par"] > 1: flags += ["--sp"]
    print(" ".join(str(x) for x in flags))
    print("tp %s pp %s dp %s mbs %s V %s %s recompute, optimizer sharding %s, tp comm %s" % (
        e["tensor_par"], e["pipeline_par"], e["data_par"], e["microbatch_size"],
        e["pipeline_interleaving"], rec, e["optimizer_sharding"], e["tensor_par_comm_type"]))
P

row() { # label, then cells
  if [ $MARKDOWN = 1 ]; then
    local line="|" x
    for x in "$@"; do line="$line $x |"; done
    echo "$line"
  else
    printf '  %-44s %s\n' "$1" "${*:2}"
  fi
}

for c in "${CASES[@]}"; do
  read -r MODEL HW CHIPS GBS CMODEL CSYS <<<"$(case_args "$c")"
  if [ $MARKDOWN = 1 ]; then echo; echo "### $c: $(basename "$MODEL" .json) on $CHIPS $HW, global batch $GBS"; echo
  else echo "== $c: $(basename "$MODEL" .json) on $CHIPS $HW, global batch $GBS"; fi
  # --- tpusim's search
  TCMD="$TPUSIM plan $MODEL --hw $HW --chips $CHIPS --gbs $GBS --json --top 1"
  # as shown: the 22B's model file is the one this script writes
  TSHOW="tpusim plan $(basename "$MODEL") --hw $HW --chips $CHIPS --gbs $GBS --json --top 1"
  t0=$(now); $TCMD > "$WORK/plan.json"; t1=$(now)
  T_WALL=$(echo "$t1 - $t0" | bc -l)
  T_EVAL=$($PY "$WORK/j.py" field "$WORK/plan.json" evaluated)
  T_STEP=$($PY "$WORK/j.py" field "$WORK/plan.json" best.step_time_s)
  T_SEARCH=$(printf '%.2f' "$($PY "$WORK/j.py" field "$WORK/plan.json" search_s)")
  T_FLAGS=$($PY "$WORK/j.py" tpusim-best "$WORK/plan.json")
  T_PLAN=$(echo "$T_FLAGS" | sed 's/--//g')
  if [ $MARKDOWN = 1 ] && [ -n "${CALCULON:-}" ]; then echo "| | tpusim | Calculon |"; echo "|---|---|---|"
  elif [ $MARKDOWN = 1 ]; then echo "| | tpusim |"; echo "|---|---|"; fi
  if [ -z "${CALCULON:-}" ]; then
    row "plans evaluated" "$T_EVAL"
    row "wall time (s)" "$(printf '%.2f' "$T_WALL")"
    row "  of which planning, as plan reports it (s)" "$T_SEARCH"
    row "plans per second" "$(printf '%.0f' "$(echo "$T_EVAL / $T_WALL" | bc -l)")"
    row "tpusim's best plan" "$T_PLAN"
    row "  its step, tpusim (s)" "$(printf '%.3f' "$T_STEP")"
    [ $MARKDOWN = 1 ] && { echo; echo "Command: \`$TSHOW\`."; }
    continue
  fi
  # --- Calculon's search (run from its checkout: it reads models/ and systems/)
  CCMD="bin/calculon llm-optimal-execution $CMODEL $CHIPS $GBS float16 $CSYS out.json -c $CPUS -m"
  t0=$(now)
  (cd "$CALCULON" && PYTHONPATH=. $PY bin/calculon llm-optimal-execution "$CMODEL" "$CHIPS" "$GBS" float16 \
      "$CSYS" "$WORK/copt.json" -c "$CPUS" -m) > "$WORK/copt.log" 2>&1 || { cat "$WORK/copt.log" >&2; exit 1; }
  t1=$(now)
  C_WALL=$(echo "$t1 - $t0" | bc -l)
  C_EVAL=$(sed -n 's/.*Total executions: \([0-9]*\).*/\1/p' "$WORK/copt.log" | head -1)
  C_STEP_C=$($PY "$WORK/j.py" field "$WORK/copt.json" 0.stats.total_time)
  mapfile -t CB < <($PY "$WORK/j.py" calculon-best "$WORK/copt.json")
  # Calculon's best, simulated by tpusim
  # shellcheck disable=SC2086
  $TPUSIM simulate $MODEL --hw $HW --chips $CHIPS --gbs $GBS ${CB[0]} --json > "$WORK/sim.json"
  C_STEP_T=$($PY "$WORK/j.py" field "$WORK/sim.json" step_time_s)
  # tpusim's best, evaluated by Calculon
  $PY "$WORK/j.py" calculon-exe "$WORK/plan.json" float16 "$WORK/texe.json"
  if (cd "$CALCULON" && PYTHONPATH=. $PY bin/calculon llm "$CMODEL" "$WORK/texe.json" "$CSYS" "$WORK/tstats.json") \
      > "$WORK/tllm.log" 2>&1; then
    T_STEP_C=$(printf '%.3f' "$($PY "$WORK/j.py" field "$WORK/tstats.json" total_time)")
  else
    T_STEP_C="refused: $(grep -m1 -i 'error' "$WORK/tllm.log" | cut -c1-80)"
  fi
  row "plans evaluated" "$T_EVAL" "$C_EVAL"
  row "wall time (s)" "$(printf '%.2f' "$T_WALL")" "$(printf '%.1f' "$C_WALL")"
  row "  of which planning, as plan reports it (s)" "$T_SEARCH" ""
  row "plans per second" "$(printf '%.0f' "$(echo "$T_EVAL / $T_WALL" | bc -l)")" \
      "$(printf '%.0f' "$(echo "$C_EVAL / $C_WALL" | bc -l)")"
  row "tpusim's best plan" "$T_PLAN" ""
  row "  its step by tpusim / Calculon (s)" "$(printf '%.3f' "$T_STEP")" "$T_STEP_C"
  row "Calculon's best plan" "" "${CB[1]}"
  row "  its step by tpusim / Calculon (s)" "$(printf '%.3f' "$C_STEP_T")" "$(printf '%.3f' "$C_STEP_C")"
  # the issue's test: tpusim's best at least as fast as Calculon's, by tpusim's simulation
  if [ "$(echo "$T_STEP <= $C_STEP_T * 1.0000001" | bc -l)" = 1 ]; then VERDICT=yes; else VERDICT=no; fi
  row "tpusim's best at least as fast (by tpusim)" "$VERDICT" ""
  if [ $MARKDOWN = 1 ]; then
    echo
    echo "Commands: \`$TSHOW\`; in the Calculon checkout \`$CCMD\` (PYTHONPATH=.)."
  fi
done
if [ -z "${CALCULON:-}" ]; then
  echo
  echo "Calculon's side: set CALCULON to a checkout of https://github.com/calculon-ai/calculon"
  echo "(git clone it; Python 3 with numpy, pandas and psutil runs it) and run this again."
fi
if [ $MARKDOWN = 1 ]; then
  CAL=""
  [ -n "${CALCULON:-}" ] && CAL=" and Calculon $(git -C "$CALCULON" rev-parse --short HEAD 2>/dev/null || cat "$CALCULON/.commit" 2>/dev/null || echo '?') ($CPUS worker processes)"
  echo
  echo "Run on $(date -u +%Y-%m-%d) with tpusim $(git rev-parse --short HEAD 2>/dev/null || echo '?')$CAL," \
       "on $(nproc) cores, load average $(cut -d' ' -f1 /proc/loadavg) at the end."
fi
