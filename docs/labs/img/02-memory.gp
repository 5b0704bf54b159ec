# tpusim plot memory llama3-8b --hw a100-40g --chips 8 -o docs/labs/img/02-memory.png
# Edit and re-draw: cd docs/labs/img && gnuplot 02-memory.gp
# The data: 02-memory.dat (columns named in its header).
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
  set terminal pngcairo size 900,560 font 'DejaVu Sans,10' background rgb 'white'
} else {
  set terminal png size 900,560
}
set output '02-memory.png'
DAT = '02-memory.dat'
set grid
set key below
set title 'Memory per chip: llama3-8b, 8 x a100-40g'
CAP = 40.000000  # GiB of HBM per chip
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.6
set ylabel 'GiB per chip'
set yrange [0:*]
set xtics rotate by -20
set grid noxtics
set arrow from graph 0, first CAP to graph 1, first CAP nohead lw 2 lc rgb '#d62728' front
set label sprintf('capacity %.0f GiB', CAP) at graph 0.01, first CAP offset 0,0.7 tc rgb '#d62728' front
plot DAT using 2:xtic(1) title 'weights' lc rgb '#1f77b4', \
     '' using 3 title 'gradients' lc rgb '#ff7f0e', \
     '' using 4 title 'optimizer' lc rgb '#2ca02c', \
     '' using 5 title 'activations' lc rgb '#9467bd', \
     '' using 6 title 'temporary' lc rgb '#8c564b', \
     NaN with lines lw 2 lc rgb '#d62728' title 'capacity'
