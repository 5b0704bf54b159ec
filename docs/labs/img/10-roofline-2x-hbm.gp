# tpusim plot roofline llama3-8b --hw h100-sxm --seq 2048 --gbs 32 --hw-file docs/labs/data/h100-sxm-2x-hbm.json -o docs/labs/img/10-roofline-2x-hbm.png
# Edit and re-draw: cd docs/labs/img && gnuplot 10-roofline-2x-hbm.gp
# The data: 10-roofline-2x-hbm.dat (columns named in its header).
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
  set terminal pngcairo size 900,560 font 'DejaVu Sans,10' background rgb 'white'
} else {
  set terminal png size 900,560
}
set output '10-roofline-2x-hbm.png'
DAT = '10-roofline-2x-hbm.dat'
set grid
set key below
set title 'Roofline: llama3-8b training step on h100-sxm'
PEAK = 9.890000e+02  # TFLOP/s, 16-bit matrix peak
BW = 6.700000e+00    # TB/s, HBM
RIDGE = PEAK / BW  # FLOP/byte
roof(x) = (x * BW < PEAK) ? x * BW : PEAK
set key inside top left Left reverse opaque box
set format x '%g'
set format y '%g'
set logscale xy
set xlabel 'arithmetic intensity (FLOP/byte)'
set ylabel 'achieved TFLOP/s'
set xrange [1.562500e-02:1.497027e+04]
set yrange [*:PEAK * 3]
set samples 400
set arrow from RIDGE, graph 0 to RIDGE, graph 1 nohead dashtype 2 lc rgb '#888888'
set label sprintf('ridge %.0f FLOP/B', RIDGE) at RIDGE * 1.15, PEAK * 1.6 left
plot roof(x) with lines lw 2 lc rgb '#000000' title sprintf('roofline (%.0f TFLOP/s, %.2f TB/s)', PEAK, BW), \
     DAT index 0 using 1:2 with points pt 7 ps 1.0 lc rgb '#1f77b4' title 'matmul (dot, conv)', \
     DAT index 1 using 1:2 with points pt 5 ps 0.7 lc rgb '#ff7f0e' title 'vector (elementwise, reduce, ...)', \
     DAT index 2 using 1:2 with points pt 9 ps 0.9 lc rgb '#2ca02c' title 'optimizer update'
