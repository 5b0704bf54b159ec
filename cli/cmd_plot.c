/*
** cmd_plot.c -- `tpusim plot`: gnuplot charts (viz/plot.h).
*/
#include "cli_int.h"

#include "../viz/plot.h"

const cli_cmd cli_cmd_plot = {"plot", "tpusim plot KIND ... -o FILE.png|svg   (tpusim plot --help for the kinds)",
    "gnuplot charts: roofline, scaling, memory, pareto, breakdown, collective", NULL, NULL,
    NULL, NULL, plot_main};
