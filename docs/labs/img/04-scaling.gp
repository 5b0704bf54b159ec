# tpusim plot scaling bert-large --hw a100-40g-gcp --max-chips 64 -o docs/labs/img/04-scaling.png
# Edit and re-draw: cd docs/labs/img && gnuplot 04-scaling.gp
# The data: 04-scaling.dat (columns named in its header).
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
  set terminal pngcairo size 900,560 font 'DejaVu Sans,10' background rgb 'white'
} else {
  set terminal png size 900,560
}
set output '04-scaling.png'
DAT = '04-scaling.dat'
set grid
set key below
set title 'Data-parallel scaling: bert-large on a100-40g-gcp'
set logscale x 2
set xlabel 'chips (data parallel)'
set ylabel 'tokens/s'
set y2label 'scaling efficiency (%)'
set yrange [0:*]
set y2range [0:110]
set ytics nomirror
set y2tics
set key left
plot DAT index 0 using 1:2 with linespoints lw 2 pt 7 lc rgb '#1f77b4' title 'throughput, all-reduce', \
     DAT index 0 using 1:($3*100) axes x1y2 with linespoints dt 2 pt 6 lc rgb '#1f77b4' title 'efficiency, all-reduce', \
     DAT index 1 using 1:2 with linespoints lw 2 pt 9 lc rgb '#2ca02c' title 'throughput, flat ring', \
     DAT index 1 using 1:($3*100) axes x1y2 with linespoints dt 2 pt 8 lc rgb '#2ca02c' title 'efficiency, flat ring', \
     DAT index 2 using 1:2 with linespoints lw 2 pt 5 lc rgb '#ff7f0e' title 'throughput, Reduction Server', \
     DAT index 2 using 1:($3*100) axes x1y2 with linespoints dt 2 pt 4 lc rgb '#ff7f0e' title 'efficiency, Reduction Server', \
     DAT index 3 using 1:2 with linespoints lw 2 pt 11 lc rgb '#d62728' title 'throughput, FSDP', \
     DAT index 3 using 1:($3*100) axes x1y2 with linespoints dt 2 pt 10 lc rgb '#d62728' title 'efficiency, FSDP'
