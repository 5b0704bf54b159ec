# tpusim plot serve llama3-8b --qps 50 --latency-p99 500ms --hw tpu-v6e,tpu-v5e,h100-sxm,a100-40g -o docs/img/plot-serve.png
# Edit and re-draw: cd docs/img && gnuplot plot-serve.gp
# The data: plot-serve.dat (columns named in its header).
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
  set terminal pngcairo size 900,560 font 'DejaVu Sans,10' background rgb 'white'
} else {
  set terminal png size 900,560
}
set output 'plot-serve.png'
DAT = 'plot-serve.dat'
set grid
set key below
set datafile missing '-'
set multiplot layout 1,2 title 'Serving llama3-8b at 50 requests/s: latency vs throughput as the batch doubles (ringed: the batch serve keeps)'
set logscale x
set format x '%g'
set yrange [0:*]
set xlabel 'output tokens/s per chip (decode, full batch)'
set ylabel 'time per output token (ms)'
plot DAT index 0 using 2:3 with linespoints lw 2 pt 7 ps 0.8 lc 1 title 'tpu-v6e bf16 tp1', \
     DAT index 0 using 2:($7 == 1 ? $3 : 1/0) with points pt 6 ps 2.5 lw 2 lc 1 notitle, \
     DAT index 1 using 2:3 with linespoints lw 2 pt 7 ps 0.8 lc 2 title 'tpu-v5e bf16 tp2', \
     DAT index 1 using 2:($7 == 1 ? $3 : 1/0) with points pt 6 ps 2.5 lw 2 lc 2 notitle, \
     DAT index 2 using 2:3 with linespoints lw 2 pt 7 ps 0.8 lc 3 title 'a100-40g bf16 tp1', \
     DAT index 2 using 2:($7 == 1 ? $3 : 1/0) with points pt 6 ps 2.5 lw 2 lc 3 notitle, \
     DAT index 3 using 2:3 with linespoints lw 2 pt 7 ps 0.8 lc 4 title 'h100-sxm bf16 tp1', \
     DAT index 3 using 2:($7 == 1 ? $3 : 1/0) with points pt 6 ps 2.5 lw 2 lc 4 notitle
set ylabel 'p99 time to first token, queueing included (ms)'
plot DAT index 0 using 2:5 with linespoints lw 2 pt 7 ps 0.8 lc 1 title 'tpu-v6e bf16 tp1', \
     DAT index 0 using 2:($7 == 1 ? $5 : 1/0) with points pt 6 ps 2.5 lw 2 lc 1 notitle, \
     DAT index 1 using 2:5 with linespoints lw 2 pt 7 ps 0.8 lc 2 title 'tpu-v5e bf16 tp2', \
     DAT index 1 using 2:($7 == 1 ? $5 : 1/0) with points pt 6 ps 2.5 lw 2 lc 2 notitle, \
     DAT index 2 using 2:5 with linespoints lw 2 pt 7 ps 0.8 lc 3 title 'a100-40g bf16 tp1', \
     DAT index 2 using 2:($7 == 1 ? $5 : 1/0) with points pt 6 ps 2.5 lw 2 lc 3 notitle, \
     DAT index 3 using 2:5 with linespoints lw 2 pt 7 ps 0.8 lc 4 title 'h100-sxm bf16 tp1', \
     DAT index 3 using 2:($7 == 1 ? $5 : 1/0) with points pt 6 ps 2.5 lw 2 lc 4 notitle
unset multiplot
