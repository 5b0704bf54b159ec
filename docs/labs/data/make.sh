#!/usr/bin/env bash
# The what-if lab's hardware files (docs/labs/10-what-if.md): catalog
# entries as `tpusim hw show NAME --json` writes them, with one figure
# changed and the description and that figure's note saying so. Written
# from the catalog each time, so a lab file never lags its entry (a copy
# made by hand kept the figures of the day it was made). `make docs` runs
# this; tests/cli.sh checks the committed files are what it writes.
#
#   bash docs/labs/data/make.sh [OUTDIR]     (TPUSIM: the binary)
set -euo pipefail
TPUSIM=${TPUSIM:-./tpusim}
out=${1:-docs/labs/data}

# entry NAME: the catalog entry as a hardware file (hw show's "origin",
# which says where the entry came from, is not part of the schema)
entry() {
  "$TPUSIM" hw show "$1" --json |
    awk '/^\t"origin":/ { sub(/,$/, "", prev); print prev; prev = ""; skip = 1; next }
         NR > 1 && !skip { print prev } { prev = $0; skip = 0 } END { print prev }'
}

lab='LAB WHAT-IF (docs/labs/10-what-if.md)'
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "docs/labs/data/make.sh: $*" >&2; exit 1; }

entry h100-sxm >"$tmp/h100.json" || fail "tpusim hw show h100-sxm failed"
sed -e 's|^\t"description":\t"|&LAB WHAT-IF, twice the HBM bandwidth: |' \
    -e 's|^\t\t"hbm_bw_bytes_per_s":\t3350000000000,|\t\t"hbm_bw_bytes_per_s":\t6700000000000,|' \
    -e "s|^\t\"notes\":\t{|&\n\t\t\"chip.hbm_bw_bytes_per_s\":\t\"$lab: twice the H100 SXM's 3.35e12 B/s; not a real part\",|" \
    "$tmp/h100.json" >"$tmp/h100-sxm-2x-hbm.json"

entry tpu-v5e >"$tmp/v5e.json" || fail "tpusim hw show tpu-v5e failed"
sed -e 's|^\t"description":\t"|&LAB WHAT-IF, twice the ICI bandwidth: |' \
    -e 's|^\t\t\t"link_bw_bytes_per_s":\t45000000000,|\t\t\t"link_bw_bytes_per_s":\t90000000000,|' \
    -e 's|^\t\t\t"bw_per_chip_bytes_per_s":\t180000000000,|\t\t\t"bw_per_chip_bytes_per_s":\t360000000000,|' \
    -e "s|^\t\t\"system.scale_up.link_bw_bytes_per_s\":\t\"|&$lab: twice the figure below, 9e10 B/s per link each way, bw_per_chip doubled with it; not a real part. Catalog note: |" \
    "$tmp/v5e.json" >"$tmp/tpu-v5e-2x-ici.json"

# each file changed where it says (the figure, the description, the note:
# each on exactly one line) and loads; only then do both replace the
# committed ones
want() {
  local n
  n=$(grep -c -- "$2" "$tmp/$1" || true)
  [ "$n" -eq 1 ] || fail "$1: $n lines match '$2', want 1 (the catalog entry changed: update this script)"
}
want h100-sxm-2x-hbm.json '"hbm_bw_bytes_per_s":	6700000000000'
want h100-sxm-2x-hbm.json '"description":	"LAB WHAT-IF, twice the HBM bandwidth: '
want h100-sxm-2x-hbm.json "\"chip.hbm_bw_bytes_per_s\":	\"$lab"
want tpu-v5e-2x-ici.json '"link_bw_bytes_per_s":	90000000000'
want tpu-v5e-2x-ici.json '"bw_per_chip_bytes_per_s":	360000000000'
want tpu-v5e-2x-ici.json '"description":	"LAB WHAT-IF, twice the ICI bandwidth: '
want tpu-v5e-2x-ici.json "\"system.scale_up.link_bw_bytes_per_s\":	\"$lab"
files="h100-sxm-2x-hbm.json tpu-v5e-2x-ici.json"
for f in $files; do
  "$TPUSIM" hw show --hw-file "$tmp/$f" >/dev/null || fail "$f does not load"
done
for f in $files; do mv "$tmp/$f" "$out/$f"; done
