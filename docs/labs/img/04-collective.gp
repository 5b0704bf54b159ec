# tpusim plot collective --hw a100-40g-gcp --chips 32 --op all-reduce -o docs/labs/img/04-collective.png
# Edit and re-draw: cd docs/labs/img && gnuplot 04-collective.gp
# The data: 04-collective.dat (columns named in its header).
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
  set terminal pngcairo size 900,560 font 'DejaVu Sans,10' background rgb 'white'
} else {
  set terminal png size 900,560
}
set output '04-collective.png'
DAT = '04-collective.dat'
set grid
set key below
set title 'Collective bus bandwidth: all-reduce, 32 chips on a100-40g-gcp'
set logscale x 2
set xlabel 'message size (bytes per chip)'
set ylabel 'bus bandwidth (GB/s)'
set yrange [0:*]
set xtics ('1K' 1024, '16K' 16384, '256K' 262144, '4M' 4194304, '64M' 67108864, '1G' 1073741824)
plot DAT index 0 using 1:4 with linespoints lw 2 pt 4 title 'ring', \
     DAT index 1 using 1:4 with linespoints lw 2 pt 5 title 'biring', \
     DAT index 2 using 1:4 with linespoints lw 2 pt 6 title 'tree', \
     DAT index 3 using 1:4 with linespoints lw 2 pt 7 title 'hierarchical', \
     DAT index 4 using 1:4 with linespoints lw 2 pt 8 title 'reduction-server'
