#!/usr/bin/env bash
# The layering check (docs/architecture.md, "Layers"): each folder may
# include and call only its own layer and the ones below it,
#
#   base < hw_models < workloads < sim < planner < viz < cli
#
# Two views, so neither a stray #include nor a call through a hand-written
# prototype gets past:
#   1. every #include "..." of a source file resolves to a folder of the
#      same or a lower layer;
#   2. every symbol an object file of the library uses (nm -u) and that
#      another of its objects defines is defined in the same or a lower
#      layer (the objects in BUILD, the first argument: default build).
# Prints each violation as FILE: LAYER -> LAYER (what), and exits 1 if any.
set -u
BUILD=${1:-build}
LAYERS=(base hw_models workloads sim planner viz cli)
rank() { local i; for i in "${!LAYERS[@]}"; do [ "${LAYERS[$i]}" = "$1" ] && { echo "$i"; return; }; done; echo -1; }
bad=0

# 1. includes
for dir in "${LAYERS[@]}"; do
  r=$(rank "$dir")
  for f in "$dir"/*.c "$dir"/*.h; do
    [ -e "$f" ] || continue
    while IFS= read -r inc; do
      target=$(realpath -m --relative-to=. "$dir/$inc")
      tdir=${target%%/*}
      [ "$tdir" = "$target" ] && tdir=$dir
      tr=$(rank "$tdir")
      if [ "$tr" -lt 0 ]; then
        echo "$f: includes \"$inc\", outside the layers"; bad=1
      elif [ "$tr" -gt "$r" ]; then
        echo "$f: $dir -> $tdir (#include \"$inc\")"; bad=1
      fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
  done
done

# 2. calls and data references, from the objects
if [ -d "$BUILD" ]; then
  defs=$(mktemp)
  trap 'rm -f "$defs"' EXIT
  for dir in "${LAYERS[@]}"; do
    for o in "$BUILD/$dir"/*.o; do
      [ -e "$dir/$(basename "$o" .o).c" ] || continue # a stale object of a moved file
      nm --defined-only -g "$o" 2>/dev/null | awk -v d="$dir" 'NF==3{print $3, d}'
    done
  done | sort -u >"$defs"
  for dir in "${LAYERS[@]}"; do
    r=$(rank "$dir")
    for o in "$BUILD/$dir"/*.o; do
      [ -e "$dir/$(basename "$o" .o).c" ] || continue
      while read -r sym tdir; do
        tr=$(rank "$tdir")
        if [ "$tr" -gt "$r" ]; then echo "${o#"$BUILD"/}: $dir -> $tdir (uses $sym)"; bad=1; fi
      done < <(nm -u "$o" 2>/dev/null | awk '{print $NF}' | sort -u | join - "$defs")
    done
  done
else
  echo "layers: no $BUILD/ to read objects from; includes checked only"
fi

if [ $bad -ne 0 ]; then echo "layers: FAILED (a lower layer reaches up)"; exit 1; fi
echo "layers: ${#LAYERS[@]} layers, includes and calls run one way"
