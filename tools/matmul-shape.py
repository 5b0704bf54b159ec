#!/usr/bin/env python3
"""Writes chip.matmul_shape for a hw_models/*.json from a measured GEMM table.

Usage: tools/matmul-shape.py hw_models/data/xla-matmul-sm_90-bf16.csv

The table (columns b,m,n,k,dtype,flops_per_s; OpenXLA's kDefaultMatmulPTable,
hw_models/data/SOURCES.md) times one GEMM per row. A batch of b products of
m rows is folded into one of b x m rows (batch 4 of 1024 rows runs within a
few percent of 4096 rows: the same output tiles), so the grid's M runs 256
to 16384 and N, K 256 to 4096, each a power of two. A cell is the geometric
mean of the rows that fold to it. A larger GEMM is never faster: where a
cell's time (M N K over its rate) is below that of the cell before it on
any axis -- the table's noise at the smallest shapes, and a library
choosing another kernel (split-K) at a larger K -- its rate is lowered to
make the times equal. The grid is each cell over the largest (1 is the
table's best shape), to 4 significant digits, a lowered one rounded down.
Prints the JSON value of chip.matmul_shape; with --report, the cells
lowered, to stderr.
"""
import csv, json, math, sys

M = [256 << i for i in range(7)]
NK = [256 << i for i in range(5)]

def grid(path, report=False):
    cells = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["dtype"] != "bf16xbf16->bf16":
                continue
            key = (int(r["b"]) * int(r["m"]), int(r["n"]), int(r["k"]))
            cells.setdefault(key, []).append(math.log(float(r["flops_per_s"])))
    g = {(i, j, k): math.exp(sum(cells[(M[i], NK[j], NK[k])]) / len(cells[(M[i], NK[j], NK[k])]))
         for i in range(len(M)) for j in range(len(NK)) for k in range(len(NK))}
    size = lambda c: M[c[0]] * NK[c[1]] * NK[c[2]]
    best = max(g.values())
    # relative to the best, 4 significant digits; then in order (each cell's
    # neighbours before it on every axis are final) capped, rounded down
    out = {}
    for c in sorted(g):
        v = float(f"{g[c] / best:.4g}")
        for ax in range(3):
            if c[ax] == 0:
                continue
            p = tuple(c[a] - (a == ax) for a in range(3))
            cap = out[p] * size(c) / size(p)
            if v > cap:
                if report:
                    print(f"lowered {c} axis {ax}: {v:.4g} -> {cap:.4g}", file=sys.stderr)
                e = math.floor(math.log10(cap)) - 3
                v = math.floor(cap / 10 ** e) * 10 ** e
                v = float(f"{v:.4g}")
        out[c] = v
    return [[[out[(i, j, k)] for k in range(len(NK))] for j in range(len(NK))] for i in range(len(M))]

if __name__ == "__main__":
    g = grid(sys.argv[1], "--report" in sys.argv)
    print(json.dumps({"m": M, "n": NK, "k": NK, "eff": g}, separators=(", ", ": ")))
