/*
** helpers.h -- shared by the unit tests: run the CLI in-process, fetch an
** embedded hardware file, mutate JSON text, find line:col independently.
*/
#ifndef TPUSIM_TEST_HELPERS_H
#define TPUSIM_TEST_HELPERS_H

#include <stddef.h>
#include <stdint.h>

#include "../workloads/model.h"

typedef struct {
  int rc;
  char *out; /* malloc'd, NUL-terminated */
  char *err;
} th_run;

/* Runs `tpusim args...` (NULL-terminated) through cli_main. */
th_run th_cli(const char *first, ...);
void th_run_free(th_run *r);

struct hw_catalog;
struct hw_model;
/* The built-in catalog (asserting that it loads cleanly), and one of its
** entries (asserting that it exists). */
struct hw_catalog *th_catalog(void);
const struct hw_model *th_hw(const struct hw_catalog *c, const char *name);

/* The embedded text of hw_models/NAME.json (static storage), or NULL. */
const char *th_builtin_text(const char *name);

/* A malloc'd copy of text with the first occurrence of from replaced by to;
** aborts the test if from is absent, so a stale mutation cannot pass. */
char *th_replace(const char *text, const char *from, const char *to);

/* "line:col" of the first occurrence of needle in text, counted here
** independently of the code under test. */
void th_where(const char *text, const char *needle, char *buf, size_t n);

/* A whole file, malloc'd and NUL-terminated; its length in *n (may be
** NULL). Fails the test when the file cannot be read or is empty. */
char *th_slurp(const char *path, size_t *n);
/* Writes text to a fresh file under tests/out/ and returns its path (static). */
const char *th_write_temp(const char *name, const char *text);

/* The path of shared reference data, printf-style relative to the shared
** folder ("reference/hlo/%s"): $TPUSIM_SHARED, or, unset, the `shared`
** folder beside the repository the tests were built from (the Makefile's
** TPUSIM_SHARED). Fails the test, naming the path, the folder and how to
** set it, when the data is not there. Static storage: the next call
** overwrites it. */
const char *th_shared(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A model loaded by name or path at sequence length seq (0: the file's),
** asserting that it loads (its messages on stderr when not). */
model *th_model(const char *src, int64_t seq);
/* The same with every load option given. */
model *th_model_opts(const char *src, model_opts o);
/* FLOPs of layer 0's dots and convolutions in one phase of m's graph
** (op counts included): what a hand count of one layer is checked against. */
double th_layer0_flops(const model *m, graph_phase phase);
/* One layer of kind (WL_LAYER_* bits) of src at 1,024 tokens: its backward,
** autodiff's, about twice its forward (1.8-2.2x), as for attention layers. */
void th_assert_backward_about_twice(const char *src, int kind);
/* A hybrid's layers of `kind` (there being `layers` of them) under
** context parallelism 2 on h100-sxm (tp 1, no ep, seq 8192, megatron-core):
** their collectives are two all-to-alls each way, of in_width and out_width
** 16-bit values a token of the chip's 4096; at cp 1 they have none. */
void th_assert_cp2_a2as(const char *src, int kind, int64_t layers, double in_width,
                        double out_width);

#endif
