#!/bin/bash
# leaks.sh LOG -- fails when LeakSanitizer reports a leak that tpusim made.
#
# Criterion's own runner sometimes leaks a small block at exit (allocated in
# libcriterion.so with no caller of ours); that is not ours to fix, and
# suppressing libcriterion in LSan would hide every leak, since every test
# runs below a libcriterion frame. So a leak counts unless all its frames
# past the allocator are in system libraries.
log=$1
awk '
  /(Direct|Indirect) leak of/ { inleak = 1; ours = 0; text = $0 "\n"; next }
  inleak && /^ *#[0-9]+ / {
    text = text $0 "\n"
    if ($1 == "#0") next
    if ($0 !~ /\(\/(usr\/)?lib\//) ours = 1
    next
  }
  inleak { if (ours) { printf "%s", text; found = 1 } inleak = 0 }
  END {
    if (inleak && ours) { printf "%s", text; found = 1 }
    exit found ? 1 : 0
  }
' "$log"
