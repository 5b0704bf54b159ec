#!/usr/bin/env bash
# Writes the model.json files that the "mcore-gpt" rows of tables of runs name
# (tests/validation/mapping.csv: mcore-gpt-{layers}x{hidden}-v{vocab}.json),
# from each row's own columns: nothing is typed by hand.
#
#   bash tests/validation/models/gen-mcore-gpt.sh TABLE.csv...   (from the repository root)
#
# The rows are the GPT models of NVIDIA/Megatron-LM's README weak-scaling
# table (Megatron-Core r0.8.0, H100): the README gives layers, hidden, heads,
# vocabulary 131,072 and sequence 4096, nothing more. The rest is
# Megatron-Core's GPTModel as megatron/training/arguments.py sets it by
# default: learned absolute positions (--position-embedding-type
# learned_absolute) of max_position_embeddings = the sequence, LayerNorm,
# biases, a GeLU MLP of 4 x hidden (--ffn-hidden-size), dropout 0.1
# (--hidden-dropout, --attention-dropout). The embeddings are untied: the
# table's model sizes (1.7B ... 462B) are 12 l h^2 + 2 V h, an output layer
# of its own (--untie-embeddings-and-output-weights), and not 12 l h^2 + V h.
set -eu
out=$(dirname "${BASH_SOURCE[0]}")
awk -F, -v out="$out" '
  FNR == 1 { delete col; for (i = 1; i <= NF; i++) col[$i] = i; next }
  $col["model"] != "mcore-gpt" { next }
  {
    L = $col["layers"]; H = $col["hidden"]; A = $col["heads"]; F = $col["ffn"]; V = $col["vocab"]; S = $col["seq"]
    name = "mcore-gpt-" L "x" H "-v" V
    if (name in done) next
    done[name] = 1
    f = out "/" name ".json"
    n = split(FILENAME, part, "/"); base = part[n]
    printf "{\"name\": \"%s\", \"family\": \"transformer\",\n", name > f
    printf " \"description\": \"Megatron-Core GPT with %s layers, hidden %s, %s heads, FFN %s, vocabulary %s, %s learned positions (written by gen-mcore-gpt.sh from the row %s of %s)\",\n", L, H, A, F, V, S, $col["id"], base > f
    printf " \"source\": \"NVIDIA/Megatron-LM README model table (sizes); megatron/training/arguments.py defaults (learned positions, GeLU 4h MLP, dropout 0.1); untied output layer from the table model sizes\",\n" > f
    printf " \"layers\": %s, \"hidden\": %s, \"heads\": %s, \"ffn_hidden\": %s, \"vocab\": %s,\n", L, H, A, F, V > f
    printf " \"ffn\": \"gelu\", \"norm\": \"layernorm\", \"bias\": true, \"positions\": \"learned\", \"max_positions\": %s,\n", S > f
    printf " \"tied_embeddings\": false, \"dropout\": 0.1, \"seq_len\": %s,\n", S > f
    printf " \"train\": {\"global_batch\": 1, \"precision\": \"bf16\", \"optimizer\": \"adam\"}}\n" > f
    close(f)
    print "wrote " f
  }' "$@"
