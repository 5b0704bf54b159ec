#!/usr/bin/env bash
# A stale page fails the docs check (issue #20 item 3). Copies of a page, of
# a piped block and of a picture's data, each with one number changed as a
# hand edit would, are run through tests/docs.sh, which must fail on exactly
# that block or picture; the unchanged copies must pass, so the failure is
# the number's. So must a paragraph pinned by a figures comment whose figure
# is changed in the prose and the comment both (the tool prints another), or
# in the prose alone (the comment still holds the printed one).
#
#   bash tests/docs_stale.sh        (TPUSIM: the binary, as tests/docs.sh)
set -u
TPUSIM=${TPUSIM:-./tpusim}
export TPUSIM
DIR=tests/out/docs-stale
rm -rf "$DIR"
mkdir -p "$DIR/page" "$DIR/img"
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL  docs-stale: $*"; fail=$((fail + 1)); }

# bump FILE LINE: the line's first digit d becomes (d + 1) mod 10.
bump() {
  awk -v n="$2" 'NR == n { match($0, /[0-9]/); d = substr($0, RSTART, 1);
                          $0 = substr($0, 1, RSTART - 1) ((d + 1) % 10) substr($0, RSTART + 1) }
                 { print }' "$1" >"$1.new" && mv "$1.new" "$1"
}

# check_stale FRESH STALE LINE WHAT: $DIR/page/FRESH.md (one block) passes
# the docs check, and its copy STALE.md with LINE's first digit bumped fails
# on that block for the number alone.
check_stale() {
  local fresh=$DIR/page/$1.md stale=$DIR/page/$2.md
  cp "$fresh" "$stale"
  bump "$stale" "$3"
  if bash tests/docs.sh "$fresh" >"$DIR/$1.log" 2>&1; then ok; else
    bad "the unchanged copy of $4 fails"; sed 's/^/  | /' "$DIR/$1.log" | head -8; fi
  if bash tests/docs.sh "$stale" >"$DIR/$2.log" 2>&1; then
    bad "a changed number in $4 passed the docs check"
  elif grep -q "^FAIL  $stale:2 .*printed something else" "$DIR/$2.log" &&
       grep -q "docs: 0 passed, 1 failed" "$DIR/$2.log"; then ok
  else bad "the changed copy of $4 failed for another reason"; sed 's/^/  | /' "$DIR/$2.log" | head -8; fi
}

# 1. A page: the block of docs/hardware-choice.md holding simulate's first
# "step time" line, copied alone, then that line with a digit changed.
src=docs/hardware-choice.md
at=$(grep -n '^  step time  ' "$src" | head -1 | cut -d: -f1)
[ -n "$at" ] || { bad "$src has no simulate output"; exit 1; }
start=$(awk -v a="$at" 'NR < a && /^```/ { s = NR } END { print s }' "$src")
end=$(awk -v a="$at" 'NR > a && /^```/ { print NR; exit }' "$src")
sed -n "${start},${end}p" "$src" >"$DIR/page/fresh.md"
line=$(grep -n '^  step time  ' "$DIR/page/fresh.md" | head -1 | cut -d: -f1)
[ -n "$line" ] || { bad "no 'step time' line in $src's first simulate block"; exit 1; }
check_stale fresh stale "$line" "$src:$start"

# 2. A picture: plot-memory's script and data, one number of the data changed.
cp docs/img/plot-memory.gp docs/img/plot-memory.dat "$DIR/img/"
line=$(grep -n '^[^#]' "$DIR/img/plot-memory.dat" | head -1 | cut -d: -f1)
if DOCS_IMG=$DIR/img bash tests/docs.sh --pictures >"$DIR/img-fresh.log" 2>&1; then ok; else
  bad "the unchanged copy of docs/img/plot-memory fails"; sed 's/^/  | /' "$DIR/img-fresh.log" | head -8; fi
bump "$DIR/img/plot-memory.dat" "$line"
if DOCS_IMG=$DIR/img bash tests/docs.sh --pictures >"$DIR/img-stale.log" 2>&1; then
  bad "a changed number in docs/img/plot-memory.dat passed the docs check"
elif grep -q "the data differs" "$DIR/img-stale.log"; then ok
else bad "the changed picture failed for another reason"; sed 's/^/  | /' "$DIR/img-stale.log" | head -8; fi

# 3. A piped block (a command through `| tail`): docs/op-models.md's first,
# its first line of output changed; the filter does not hide a stale number.
src=docs/op-models.md
start=$(grep -n "^\$ \./tpusim .*| tail " "$src" | head -1 | cut -d: -f1)
[ -n "$start" ] || { bad "$src has no piped block"; exit 1; }
start=$((start - 1))
end=$(awk -v a="$start" 'NR > a && /^```/ { print NR; exit }' "$src")
sed -n "${start},${end}p" "$src" >"$DIR/page/pipe-fresh.md"
check_stale pipe-fresh pipe-stale 3 "the piped block $src:$start"

# 4. Figures in prose: the first paragraph of docs/labs/answers/ pinned by a
# figures comment, with that comment, copied alone; its first figure is
# changed (its first digit bumped) in the comment and the prose, then in the
# prose alone.
src=docs/labs/answers/01-cpu-gpu-tpu.md
at=$(grep -n '^<!-- figures: ' "$src" | head -1 | cut -d: -f1)
[ -n "$at" ] || { bad "$src has no figures comment"; exit 1; }
start=$(awk -v a="$at" 'NR < a && /^$/ { s = NR + 1 } END { print s }' "$src")
end=$(awk -v a="$at" 'NR > a && /^-->$/ { print NR; exit }' "$src")
fresh=$DIR/page/figures-fresh.md
sed -n "${start},${end}p" "$src" >"$fresh"
fl=$(($(grep -n '^<!-- figures: ' "$fresh" | cut -d: -f1) + 1)) # the first figure's line
fig=$(sed -n "${fl}p" "$fresh")
new=$(awk -v f="$fig" 'BEGIN { match(f, /[0-9]/); d = substr(f, RSTART, 1)
                             print substr(f, 1, RSTART - 1) ((d + 1) % 10) substr(f, RSTART + 1) }')
pl=$(grep -nF -- "$fig" "$fresh" | head -1 | cut -d: -f1) # its line in the prose
# swap FILE LINE: that line's first "$fig" becomes "$new".
swap() {
  awk -v n="$2" -v f="$fig" -v t="$new" 'NR == n { i = index($0, f); $0 = substr($0, 1, i - 1) t substr($0, i + length(f)) }
                                         { print }' "$1" >"$1.new" && mv "$1.new" "$1"
}
# figures_stale NAME WHY: $DIR/page/NAME.md fails on the figure's line for WHY alone.
figures_stale() {
  local page=$DIR/page/$1.md
  if bash tests/docs.sh "$page" >"$DIR/$1.log" 2>&1; then
    bad "a changed figure in $src ($1) passed the docs check"
  elif grep -qF "FAIL  $page:$fl  " "$DIR/$1.log" && grep -qF ": '$2" "$DIR/$1.log" &&
       grep -q "docs: 0 passed, 1 failed" "$DIR/$1.log"; then ok
  else bad "the changed copy of $src ($1) failed for another reason"; sed 's/^/  | /' "$DIR/$1.log" | head -8; fi
}
if [ -z "$pl" ] || [ "$pl" -ge "$fl" ]; then bad "$src: '$fig' is not in the paragraph above its comment"
elif bash tests/docs.sh "$fresh" >"$DIR/figures-fresh.log" 2>&1; then
  ok
  cp "$fresh" "$DIR/page/figures-stale.md"
  swap "$DIR/page/figures-stale.md" "$pl"
  swap "$DIR/page/figures-stale.md" "$fl"
  figures_stale figures-stale "$new' is not in its output"
  cp "$fresh" "$DIR/page/figures-prose.md"
  swap "$DIR/page/figures-prose.md" "$pl"
  figures_stale figures-prose "$fig' is not in the paragraph above"
else bad "the unchanged copy of $src:$start fails"; sed 's/^/  | /' "$DIR/figures-fresh.log" | head -8; fi

echo "docs-stale: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
