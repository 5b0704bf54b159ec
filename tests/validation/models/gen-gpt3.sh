#!/usr/bin/env bash
# Writes the GPT-3-style model.json files that the "gpt" rows of tables of
# runs name (tests/validation/mapping.csv: gpt3-{layers}x{hidden}-v{vocab}.json),
# from each row's own columns: nothing is typed by hand.
#
#   bash tests/validation/models/gen-gpt3.sh TABLE.csv...   (from the repository root)
#
# The architecture is GPT-3's (Brown et al. 2020, Table 2.1 and §2.1: GPT-2's
# pre-norm layers with LayerNorm, biases, a GeLU MLP, 2048 learned positions,
# tied input and output embeddings). Dropout 0.1 on attention and hidden
# states is Megatron-LM's default (megatron/arguments.py --hidden-dropout,
# --attention-dropout) and NeMo's (launcher conf/training/gpt3/*.yaml
# hidden_dropout 0.1), the frameworks of these rows. MaxText's GPT-3 has no
# dropout and another vocabulary: tpu-recipes rows are left out here and
# mapped to maxtext-gpt3-175b.json.
set -eu
out=$(dirname "${BASH_SOURCE[0]}")
awk -F, -v out="$out" '
  FNR == 1 { delete col; for (i = 1; i <= NF; i++) col[$i] = i; next }
  $col["model"] != "gpt" || $col["source"] ~ /^tpu-recipes/ { next }
  {
    L = $col["layers"]; H = $col["hidden"]; A = $col["heads"]; F = $col["ffn"]; V = $col["vocab"]
    name = "gpt3-" L "x" H "-v" V
    if (name in done) next
    done[name] = 1
    f = out "/" name ".json"
    n = split(FILENAME, part, "/"); base = part[n]
    printf "{\"name\": \"%s\", \"family\": \"transformer\",\n", name > f
    printf " \"description\": \"GPT-3 architecture with %s layers, hidden %s, %s heads, FFN %s, vocabulary %s (written by gen-gpt3.sh from the row %s of %s)\",\n", L, H, A, F, V, $col["id"], base > f
    printf " \"source\": \"Brown et al. 2020 Table 2.1 (architecture); Megatron-LM arguments.py and NeMo gpt3 configs (dropout 0.1)\",\n" > f
    printf " \"layers\": %s, \"hidden\": %s, \"heads\": %s, \"ffn_hidden\": %s, \"vocab\": %s,\n", L, H, A, F, V > f
    printf " \"ffn\": \"gelu\", \"norm\": \"layernorm\", \"bias\": true, \"positions\": \"learned\", \"max_positions\": 2048,\n" > f
    printf " \"tied_embeddings\": true, \"dropout\": 0.1, \"seq_len\": 2048,\n" > f
    printf " \"train\": {\"global_batch\": 1, \"precision\": \"fp16\", \"optimizer\": \"adam\"}}\n" > f
    close(f)
    print "wrote " f
  }' "$@"
