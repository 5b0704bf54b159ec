#!/usr/bin/env bash
# Docs examples are executed, never typed: every fenced block in README.md
# and docs/*.md whose first line starts with `$ ./tpusim` is run from the
# repository root and its output compared with the block's text.
#
#   bash tests/docs.sh [FILE.md ...]            check (default: README.md docs/*.md
#                                               docs/labs/*.md, docs/labs/answers/*.md and the pictures)
#   bash tests/docs.sh --update [FILE.md ...]   rewrite each block's output from a fresh run
#   bash tests/docs.sh --images                 redraw docs/img/ (make docs)
#   bash tests/docs.sh --pictures               check the pictures only
#
# A block: one or more commands, each a line `$ ./tpusim ...` (continued over
# lines ending in a backslash) followed by the output it prints, stdout then
# stderr. The rules:
#   - a line `...` cuts the rest of that command's output: only the lines
#     before it are compared (--update keeps the cut at the same line count);
#   - a command may pipe its output through a filter (`| grep 'op costs'`,
#     `| tail -n 2`): the line runs under `bash -o pipefail -c` as typed, so
#     a block can show the one line of a long output that the prose quotes
#     (a figure at the end of `--explain`); the status is the pipe's;
#   - wall-clock figures (MASKS below) are compared with the number masked;
#     --update writes the real ones;
#   - a command that prints nothing on stdout and something on stderr is an
#     error example and must exit non-zero; every other command must exit 0,
#     or 3 when its stdout says "DOES NOT FIT" (simulate's status for a plan
#     that does not fit); a crash, status >= 128, always fails;
#   - a path under ../shared/ (the reference data beside the repository) is
#     read from TPUSIM_SHARED when that is set (as the Makefile does), and
#     the output names it ../shared/ again, as typed;
#   - files a command writes (--trace, --screenshot, --out, -o; sweep's
#     --out PREFIX writes PREFIX.csv, which later commands read) go under
#     tests/out/docs/, and later commands that read them read them there; the
#     block keeps the names as a user types them. Such a command shown with
#     no output is only checked to exit 0 and write its files; an error
#     example (above) must leave them empty (tpusim refuses before writing).
# Markdown a command writes (docs/validation.md's tables) sits between
#   <!-- generated: $ ./tpusim ARGS -->
#   <!-- end generated -->
# and is compared with the command's stdout, which must exit 0; --update
# rewrites it. So a table in the docs is never typed either.
# Figures quoted in prose (the labs' answers: "123 ms a step") are pinned by
# a comment right after the paragraph that quotes them, one per command:
#   <!-- figures: $ ./tpusim simulate llama3-8b --hw h100-sxm --chips 8 --gbs 64 --zero 2
#   5.78 s
#   90719 tokens/s
#   -->
# The command (one line) runs as a block's does: the status rules, a pipe,
# ../shared/, files written under tests/out/docs/. Each following line is a
# figure as printed (a fixed string, 3 characters at least: not a bare "8"),
# and must occur in the command's output, stdout and stderr, and in the
# paragraph above the comment: its lines since the last blank one, joined by
# a space so a figure may wrap (other figures comments between are skipped).
# A figure is matched whole, not inside a longer number: "5.78 s" does not
# match "15.78 s", nor "1.2" "1.25". Each figure missing from either prints a
# FAIL line with its file:line, the command and the figure; the comment counts
# as one check. Wall-clock figures (MASKS) cannot be pinned. --update checks
# these comments but rewrites neither them nor the prose: a stale figure is
# fixed by hand, in the prose (and what was derived from it) and the comment.
# Pictures (docs/img/, docs/labs/img/) are drawn by commands, never by hand either: a
# plot's command is the first line of its gnuplot script,
#   # tpusim plot KIND ... -o docs/img/NAME.png
# and the default check (no FILE given) runs it into tests/out/docs/img/
# and compares the data it plots (NAME.dat, which the same command always
# writes byte for byte) with docs/img/NAME.dat: a stale picture fails.
# The PNG itself is not compared (gnuplot's rasterizer varies by version).
# --images redraws them in place, with the screenshots whose
# `tpusim view ... --screenshot docs/img/NAME.png` commands
# docs/visualization.md shows. DOCS_IMG names another folder of scripts
# and data to check (tests/docs_stale.sh's altered copy).
# Numbers are compared exactly: no tolerance.
# TPUSIM is the binary, ./tpusim unless set; it may carry a prefix
# (valgrind ...).
set -u
TPUSIM=${TPUSIM:-./tpusim}
OUT=tests/out/docs

update=0 images=0 pictures=0
if [ "${1:-}" = --update ]; then update=1; shift; fi
if [ "${1:-}" = --images ]; then images=1; shift; fi
only_pictures=0
if [ "${1:-}" = --pictures ]; then only_pictures=1; shift; fi
# the folders of pictures: docs/img and the labs' (DOCS_IMG: one other)
IMGS=(${DOCS_IMG:-docs/img docs/labs/img})
if [ $# -gt 0 ]; then files=("$@"); else files=(README.md docs/*.md docs/labs/*.md docs/labs/answers/*.md) pictures=1; fi

# Wall-clock figures, as sed -E substitutions applied to both sides.
MASKS=(
  's/(evaluated [0-9]+ plans in )[0-9.]+( s)/\1#\2/'   # plan's search time
  's/("search_s":[[:space:]]*)[0-9.eE+-]+/\1#/'         # plan --json
  's/( kernels .* in )[0-9.]+( s;)/\1#\2/'              # calibrate
)
mask() {
  local args=() m
  for m in "${MASKS[@]}"; do args+=(-e "$m"); done
  sed -E "${args[@]}"
}

rm -rf "$OUT"
mkdir -p "$OUT"
cmd_re='^\$ \./tpusim( |$)'
pass=0 fail=0
declare -A outmap   # a file name as typed -> where it was written

# run_cmd TEXT: runs one command (its lines as typed, "$ " included); sets
# rc, written (files it writes, as typed) and fills $OUT/cur.{out,err,all}.
run_cmd() {
  local text=${1#\$ } flat words=() w prev="" f mapped
  flat=${text//$'\\\n'/ }
  read -r -a words <<<"${flat#./tpusim}"
  written=()
  for ((w = 0; w < ${#words[@]}; w++)); do
    local word=${words[w]}
    f=""
    case $prev in --trace | --screenshot | --out | -o) f=$word ;; esac
    if [[ $word == ../shared/* ]] && [ -n "${TPUSIM_SHARED:-}" ]; then
      words[w]=$TPUSIM_SHARED/${word#../shared/}
    elif [ -n "$f" ]; then
      mapped=$OUT/files/${f#/}
      mkdir -p "$(dirname "$mapped")"
      rm -f "$mapped" "$mapped.csv" # what this command writes, not an earlier one's
      outmap[$f]=$mapped
      written+=("$f")
      words[w]=$mapped
    elif [ -n "${outmap[$word]+x}" ]; then
      words[w]=${outmap[$word]}
    elif [[ $word == *.csv ]] && [ -n "${outmap[${word%.csv}]+x}" ]; then
      words[w]=${outmap[${word%.csv}]}.csv # sweep --out PREFIX wrote PREFIX.csv
    fi
    prev=$word
  done
  bash -o pipefail -c "$TPUSIM ${words[*]}" >"$OUT/cur.out" 2>"$OUT/cur.err"
  rc=$?
  # The names as typed, wherever the output mentions a file written here.
  cat "$OUT/cur.out" "$OUT/cur.err" >"$OUT/cur.all"
  for f in "${!outmap[@]}"; do
    mapped=${outmap[$f]}
    sed -i "s|${mapped//|/\\|}|${f//|/\\|}|g" "$OUT/cur.all"
  done
  # ... and the reference data's path as typed (../shared/), wherever it lies
  [ -n "${TPUSIM_SHARED:-}" ] && sed -i "s|${TPUSIM_SHARED//|/\\|}/|../shared/|g" "$OUT/cur.all"
  return 0
}

# run_status LABEL: after run_cmd, the rules on the exit status and the
# files written; sets st_why ("; why" for each broken, "" when they hold).
run_status() {
  local label=$1 want=0 f
  st_why=""
  [ ! -s "$OUT/cur.out" ] && [ -s "$OUT/cur.err" ] && want=1
  if [ "$rc" -ge 128 ]; then
    st_why="; '$label' crashed (status $rc)"; return
  elif [ "$want" = 0 ] && [ "$rc" != 0 ] && ! { [ "$rc" = 3 ] && grep -q "DOES NOT FIT" "$OUT/cur.out"; }; then
    st_why+="; '$label' exited $rc"
  elif [ "$want" = 1 ] && [ "$rc" = 0 ]; then
    st_why+="; '$label' printed only on stderr but exited 0"
  fi
  for f in "${written[@]}"; do
    if [ "$want" = 1 ]; then # an error example writes nothing
      [ -s "${outmap[$f]}" ] || [ -s "${outmap[$f]}.csv" ] && st_why+="; '$label' failed but wrote $f"
    else
      [ -s "${outmap[$f]}" ] || [ -s "${outmap[$f]}.csv" ] || st_why+="; '$label' wrote no $f"
    fi
  done
}

# check_block FILE LINE: the block is in blk[]; sets blk_ok (everything
# holds), blk_run_ok (everything but the text: statuses, files, the block's
# shape) and new[] (the block as --update writes it).
check_block() {
  local file=$1 lineno=$2 k=0 n=${#blk[@]} first=1
  local why="" diffs=""
  blk_ok=1 blk_run_ok=1
  new=()
  while ((k < n)); do
    # The command: its first line and its continuation lines.
    local start=$k text=${blk[k]}
    new+=("${blk[k]}")
    while [[ ${blk[k]} == *\\ ]] && ((k + 1 < n)); do
      k=$((k + 1)); text+=$'\n'${blk[k]}; new+=("${blk[k]}")
    done
    k=$((k + 1))
    # Its output as the block shows it, up to the next command.
    local exp=() cut=-1
    while ((k < n)) && ! [[ ${blk[k]} =~ $cmd_re ]]; do
      if [ "${blk[k]}" = "..." ] && [ "$cut" -lt 0 ]; then cut=${#exp[@]};
      elif [ "$cut" -ge 0 ]; then why+="; line $((lineno + k)): text after '...'"; blk_ok=0 blk_run_ok=0;
      else exp+=("${blk[k]}"); fi
      k=$((k + 1))
    done
    local label=${text#\$ ./tpusim }
    label=${label//$'\\\n'/}
    label=$(printf '%s' "$label" | tr -s ' ')
    ((first)) || summary+=" ; "
    summary+=$label
    first=0

    run_cmd "$text"
    local act=()
    mapfile -t act <"$OUT/cur.all"
    run_status "$label"
    [ -n "$st_why" ] && { why+=$st_why; blk_ok=0 blk_run_ok=0; }
    if [ "$rc" -ge 128 ]; then
      diffs+=$(head -5 "$OUT/cur.err" | sed 's/^/    | /')$'\n'
      continue
    fi
    # A command that writes files, shown without output: status and files only.
    if [ ${#written[@]} -gt 0 ] && [ ${#exp[@]} -eq 0 ] && [ "$cut" -lt 0 ]; then
      continue
    fi
    local got=("${act[@]}")
    if [ "$cut" -ge 0 ] && [ ${#act[@]} -gt "$cut" ]; then got=("${act[@]:0:cut}"); fi
    local d
    d=$(diff -U1 --label "$file:$((lineno + start))" --label "run" \
          <(((${#exp[@]})) && printf '%s\n' "${exp[@]}" | mask) \
          <(((${#got[@]})) && printf '%s\n' "${got[@]}" | mask))
    if [ -n "$d" ]; then
      why+="; '$label' printed something else"; blk_ok=0
      diffs+=$(printf '%s\n' "$d" | head -20 | sed 's/^/    /')$'\n'
    fi
    ((${#got[@]})) && new+=("${got[@]}")
    [ "$cut" -ge 0 ] && [ ${#act[@]} -gt "$cut" ] && new+=("...")
  done
  blk_why=${why#; }
  blk_diffs=$diffs
}

# check_generated FILE LINE: the region's command is $gen_cmd, its lines
# blk[]; sets blk_ok, blk_why, blk_diffs and new[] (the region's fresh lines).
check_generated() {
  local file=$1 lineno=$2 d
  blk_ok=1 blk_why="" blk_diffs=""
  run_cmd "$gen_cmd"
  mapfile -t new <"$OUT/cur.out"
  if [ "$rc" != 0 ]; then
    blk_ok=0 blk_why="exited $rc"
    blk_diffs=$(head -5 "$OUT/cur.err" | sed 's/^/    | /')$'\n'
    new=("${blk[@]}")
    return
  fi
  d=$(diff -U1 --label "$file:$lineno" --label "run" \
        <(((${#blk[@]})) && printf '%s\n' "${blk[@]}" | mask) \
        <(((${#new[@]})) && printf '%s\n' "${new[@]}" | mask))
  if [ -n "$d" ]; then
    blk_ok=0 blk_why="printed something else"
    blk_diffs=$(printf '%s\n' "$d" | head -20 | sed 's/^/    /')$'\n'
  fi
}

# check_figures FILE LINE: runs $fig_cmd; each figure of blk[] (LINE is
# the first's) must be in its output and in $para, the paragraph above.
# Prints a FAIL line for each that is not; sets blk_ok, blk_why and nfig.
check_figures() {
  local file=$1 lineno=$2 label=${fig_cmd#\$ ./tpusim } k fig re all prose w
  blk_ok=1 blk_why="" nfig=0
  run_cmd "$fig_cmd"
  run_status "$label"
  if [ -n "$st_why" ]; then
    blk_ok=0 blk_why=${st_why#; }
    blk_diffs=$(head -5 "$OUT/cur.err" | sed 's/^/    | /')$'\n'
    return
  fi
  all=$(<"$OUT/cur.all")
  read -r -a w <<<"$para"
  prose=${w[*]}
  for ((k = 0; k < ${#blk[@]}; k++)); do
    fig=${blk[k]}
    [ -n "$fig" ] || continue
    nfig=$((nfig + 1))
    if ((${#fig} < 3)); then blk_why="'$fig' is too short to pin"
    else
      # The figure as an ERE, not part of a longer number.
      re=$(printf '%s' "$fig" | sed 's/[][\.*^$+?(){}|]/\\&/g')
      re="(^|[^0-9.])$re([^0-9.]|\.([^0-9]|\$)|\$)"
      if ! [[ $all =~ $re ]]; then blk_why="'$fig' is not in its output"
      elif ! [[ $prose =~ $re ]]; then blk_why="'$fig' is not in the paragraph above"
      else continue; fi
    fi
    printf 'FAIL  %s:%d  %s: %s\n' "$file" $((lineno + k)) "$label" "$blk_why"
    blk_ok=0
  done
}

gen_re='^<!-- generated: (\$ \./tpusim .*) -->$'
fig_re='^<!-- figures: (\$ \./tpusim .*)$'
gen_end='<!-- end generated -->'

if ! command -v "${TPUSIM%% *}" >/dev/null 2>&1 && [ ! -x "${TPUSIM%% *}" ]; then
  echo "docs: no binary '$TPUSIM' (make first, or set TPUSIM)"; exit 2
fi

# check_pictures: each plot's command (its .gp's first line) run into
# $OUT/img, its data compared with docs/img's; with --images, run in place.
check_pictures() {
  local IMG
  for IMG in "${IMGS[@]}"; do check_pictures_in "$IMG"; done
}

check_pictures_in() {
  local IMG=$1 gp cmd dat d
  mkdir -p "$OUT/img"
  for gp in "$IMG"/*.gp; do
    [ -f "$gp" ] || continue
    cmd=$(head -1 "$gp")
    cmd=${cmd#\# tpusim }
    dat=$(basename "${gp%.gp}.dat")
    if ((!images)); then # the picture goes to $OUT/img, whichever folder -o names
      local png=${cmd##* -o }
      png=${png%% *}
      cmd=${cmd/ -o $png/ -o $OUT/img/${png##*/}}
    fi
    if ! bash -c "$TPUSIM $cmd" >"$OUT/cur.out" 2>"$OUT/cur.err"; then
      printf 'FAIL  %s:1  plot: exited non-zero\n' "$gp"
      sed 's/^/    | /' "$OUT/cur.err" | head -5
      fail=$((fail + 1))
    elif ((images)); then
      printf 'drawn %s\n' "${gp%.gp}.png"
      pass=$((pass + 1))
    elif d=$(diff -U1 --label "$IMG/$dat" --label run "$IMG/$dat" "$OUT/img/$dat"); then
      printf 'ok    %s:1  %s\n' "$gp" "${cmd%% -o *}"
      pass=$((pass + 1))
    else
      printf 'FAIL  %s:1  %s: the data differs (make docs redraws it)\n' "$gp" "${cmd%% -o *}"
      printf '%s\n' "$d" | head -12 | sed 's/^/    /'
      fail=$((fail + 1))
    fi
  done
}

# draw_screenshots: the `tpusim view ... --screenshot docs/img/...` commands
# of docs/visualization.md, run in place (--images only: a PNG is not compared).
draw_screenshots() {
  local line cmd
  while IFS= read -r line; do
    cmd=${line#tpusim }
    if SDL_VIDEODRIVER=${SDL_VIDEODRIVER:-offscreen} bash -c "$TPUSIM $cmd" >/dev/null 2>"$OUT/cur.err"; then
      printf 'drawn %s\n' "$(grep -o 'docs/img/[^ ]*' <<<"$cmd")"
      pass=$((pass + 1))
    else
      printf 'FAIL  docs/visualization.md  %s\n' "$cmd"
      sed 's/^/    | /' "$OUT/cur.err" | head -5
      fail=$((fail + 1))
    fi
  done < <(sed -e ':a' -e '/\\$/N; s/\\\n */ /; ta' docs/visualization.md |
           grep -E '^tpusim view [^.].*--screenshot docs/img/')
}

if ((images)); then
  check_pictures
  draw_screenshots
  echo "docs: $pass drawn, $fail failed"
  [ "$fail" -eq 0 ]
  exit
fi
if ((only_pictures)); then
  check_pictures
  echo "docs: $pass passed, $fail failed"
  [ "$fail" -eq 0 ]
  exit
fi

for file in "${files[@]}"; do
  [ -f "$file" ] || continue
  mapfile -t L <"$file"
  n=${#L[@]} i=0 changed=0 para=""
  out=()
  while ((i < n)); do
    if [[ ${L[i]} =~ $fig_re ]]; then
      fig_cmd=${BASH_REMATCH[1]}
      j=$((i + 1))
      while ((j < n)) && [ "${L[j]}" != "-->" ]; do j=$((j + 1)); done
      out+=("${L[@]:i:j-i+1}")
      label=${fig_cmd#\$ ./tpusim }
      blk=("${L[@]:i+1:j-i-1}")
      if ((j == n)); then
        printf 'FAIL  %s:%d  %s: no "-->" after it\n' "$file" $((i + 1)) "$label"
        fail=$((fail + 1))
      else
        check_figures "$file" $((i + 2))
        if ((blk_ok)); then
          printf 'ok    %s:%d  %s (%d pinned)\n' "$file" $((i + 1)) "$label" "$nfig"
          pass=$((pass + 1))
        else
          [ -n "$st_why" ] && printf 'FAIL  %s:%d  %s: %s\n%s' "$file" $((i + 1)) "$label" "$blk_why" "$blk_diffs"
          fail=$((fail + 1))
        fi
      fi
      i=$((j + 1))
    elif [[ ${L[i]} =~ $gen_re ]]; then
      para=""
      gen_cmd=${BASH_REMATCH[1]}
      j=$((i + 1))
      while ((j < n)) && [ "${L[j]}" != "$gen_end" ]; do j=$((j + 1)); done
      out+=("${L[i]}")
      label=${gen_cmd#\$ ./tpusim }
      if ((j == n)); then
        printf 'FAIL  %s:%d  %s: no "%s" after it\n' "$file" $((i + 1)) "$label" "$gen_end"
        fail=$((fail + 1))
        i=$((i + 1))
        continue
      fi
      blk=("${L[@]:i+1:j-i-1}")
      check_generated "$file" $((i + 2))
      if ((blk_ok)); then
        printf 'ok    %s:%d  %s\n' "$file" $((i + 1)) "$label"
        pass=$((pass + 1))
      elif ((update)) && [ "$blk_why" != "exited $rc" ]; then
        printf 'updated %s:%d  %s\n' "$file" $((i + 1)) "$label"
        changed=1 pass=$((pass + 1)) blk=("${new[@]}")
      else
        printf 'FAIL  %s:%d  %s: %s\n' "$file" $((i + 1)) "$label" "$blk_why"
        printf '%s' "$blk_diffs"
        fail=$((fail + 1))
      fi
      ((${#blk[@]})) && out+=("${blk[@]}")
      out+=("${L[j]}")
      i=$((j + 1))
    elif [[ ${L[i]} == '```'* ]]; then
      para=""
      j=$((i + 1))
      while ((j < n)) && [[ ${L[j]} != '```'* ]]; do j=$((j + 1)); done
      out+=("${L[i]}")
      blk=("${L[@]:i+1:j-i-1}")
      if ((${#blk[@]})) && [[ ${blk[0]} =~ $cmd_re ]]; then
        summary=""
        check_block "$file" $((i + 2))
        if ((update && blk_run_ok)); then
          # --update: the fresh output goes in.
          if [ ${#new[@]} != ${#blk[@]} ] || [ "$(printf '%s\n' "${new[@]}")" != "$(printf '%s\n' "${blk[@]}")" ]; then
            changed=1; printf 'updated %s:%d  %s\n' "$file" $((i + 2)) "$summary"
          else
            printf 'ok      %s:%d  %s\n' "$file" $((i + 2)) "$summary"
          fi
          pass=$((pass + 1))
          blk=("${new[@]}")
        elif ((blk_ok)); then
          printf 'ok    %s:%d  %s\n' "$file" $((i + 2)) "$summary"
          pass=$((pass + 1))
        else
          printf 'FAIL  %s:%d  %s: %s\n' "$file" $((i + 2)) "$summary" "$blk_why"
          printf '%s' "$blk_diffs"
          fail=$((fail + 1))
        fi
      fi
      ((${#blk[@]})) && out+=("${blk[@]}")
      ((j < n)) && out+=("${L[j]}")
      i=$((j + 1))
    else
      # The paragraph a figures comment pins: the lines since a blank one.
      if [[ ${L[i]} == *[![:space:]]* ]]; then para+=" ${L[i]}"; else para=""; fi
      out+=("${L[i]}")
      i=$((i + 1))
    fi
  done
  if ((update && changed)); then printf '%s\n' "${out[@]}" >"$file"; fi
done

((pictures && !update)) && check_pictures

echo "docs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
