# tpusim plot sweep docs/studies/hbm-ici.csv -o docs/img/sweep-hbm-ici.png
# Edit and re-draw: cd docs/img && gnuplot sweep-hbm-ici.gp
# The data: sweep-hbm-ici.dat (columns named in its header).
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
  set terminal pngcairo size 900,560 font 'DejaVu Sans,10' background rgb 'white'
} else {
  set terminal png size 900,560
}
set output 'sweep-hbm-ici.png'
DAT = 'sweep-hbm-ici.dat'
set grid
set key below
set termoption noenhanced
set multiplot layout 1,2 title 'Speed-up (base time / time) of the best plan over hbm_bw_scale=1, ici_bw_scale=1'
unset grid
unset key
set palette defined (0 '#f7fbff', 1 '#6baed6', 2 '#08306b')
set xrange [-0.5:3.5]
set yrange [-0.5:3.5]
set xtics ('1' 0, '1.5' 1, '2' 2, '3' 3)
set ytics ('0.5' 0, '1' 1, '2' 2, '4' 3)
set xlabel 'hbm_bw_scale'
set ylabel 'ici_bw_scale'
set title 'llama3-70b'
plot DAT index 0 using 1:2:3 with image, '' index 0 using 1:2:(sprintf('%.2f', $3)) with labels
set title 'llama3-405b'
plot DAT index 1 using 1:2:3 with image, '' index 1 using 1:2:(sprintf('%.2f', $3)) with labels
unset multiplot
