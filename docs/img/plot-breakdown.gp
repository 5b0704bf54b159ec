# tpusim plot breakdown llama3-8b --hw h100-sxm --chips 16 --seq 2048 --gbs 64 -o docs/img/plot-breakdown.png
# Edit and re-draw: cd docs/img && gnuplot plot-breakdown.gp
# The data: plot-breakdown.dat (columns named in its header).
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
  set terminal pngcairo size 900,560 font 'DejaVu Sans,10' background rgb 'white'
} else {
  set terminal png size 900,560
}
set output 'plot-breakdown.png'
DAT = 'plot-breakdown.dat'
set grid
set key below
set title 'Step-time breakdown: llama3-8b, 16 x h100-sxm'
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.6
set ylabel 'milliseconds per step'
set yrange [0:*]
set xtics rotate by -20
set grid noxtics
plot DAT using 2:xtic(1) title 'compute' lc rgb '#1f77b4', \
     '' using 3 title 'exposed comm' lc rgb '#d62728', \
     '' using 4 title 'pipeline bubble' lc rgb '#7f7f7f', \
     '' using 5 title 'input stall' lc rgb '#bcbd22', \
     '' using 6 title 'other' lc rgb '#9467bd'
