/*
** plot.h -- `tpusim plot`: charts of the simulator's results through
** gnuplot (a runtime tool, found on PATH).
**
** Kinds: roofline, scaling, memory, pareto, breakdown, collective. Each
** writes FILE.png or FILE.svg (by the extension of -o) and keeps FILE.dat
** (the data, fixed formats) and FILE.gp (the gnuplot script) beside it;
** the script names its files relative to its own folder, so
** `cd DIR && gnuplot FILE.gp` re-draws the picture after an edit.
**
** No state: every call builds what it needs and frees it.
*/
#ifndef TPUSIM_PLOT_H
#define TPUSIM_PLOT_H

#include <stdio.h>

/* argv[0] = "plot", argv[1] = KIND, then MODEL and options.
** Returns 0, 1 (bad input, gnuplot missing or failing) or 2 (usage). */
int plot_main(int argc, char **argv, FILE *out, FILE *err);

#endif
