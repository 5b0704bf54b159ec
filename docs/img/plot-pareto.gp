# tpusim plot pareto llama3-8b --max-chips 64 -o docs/img/plot-pareto.png
# Edit and re-draw: cd docs/img && gnuplot plot-pareto.gp
# The data: plot-pareto.dat (columns named in its header).
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
  set terminal pngcairo size 900,560 font 'DejaVu Sans,10' background rgb 'white'
} else {
  set terminal png size 900,560
}
set output 'plot-pareto.png'
DAT = 'plot-pareto.dat'
set grid
set key below
set title 'Cost vs time to train llama3-8b (Pareto frontier of plans)'
set format x '%g'
set format y '%g'
set logscale xy
set xlabel 'days to train'
set ylabel 'US dollars'
set offsets graph 0.05, graph 0.3, graph 0.1, graph 0.1
plot DAT index 0 using 1:2 with points pt 7 ps 1.3 lc rgb '#1f77b4' title 'best plan per hardware', \
     DAT index 0 using 1:2:3 with labels offset 0.8,-0.8 left font ',8' tc rgb '#1f77b4' notitle, \
     DAT index 1 using 1:2 with linespoints lw 2 pt 6 ps 1.5 lc rgb '#d62728' title 'Pareto frontier', \
     DAT index 1 using 1:2:3 with labels rotate by 30 offset 0.6,0.6 left font ',8' notitle
