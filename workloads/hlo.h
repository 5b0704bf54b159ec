/*
** hlo.h -- the XLA HLO text importer.
**
** Reads the text XLA prints for an HloModule (the --xla_dump_to *.txt files,
** jax.jit(f).lower(...).compile().as_text(), TF's tf2xla dumps) and builds a
** graph of the ENTRY computation: fusions and calls are inlined, tuples and
** get-tuple-element are resolved statically (the graph holds arrays only), a
** while loop's body is imported once with its trip count as the ops' count,
** and reduction lambdas become the reduce kind. Every shape the graph builder
** infers is checked against the shape written in the text.
**
** Two steps, so tests and tools can look at the parse alone: hlo_parse reads
** the text into computations of instructions (syntax, names, opcodes and
** cycles checked), hlo_build turns a parsed module into a graph. hlo_import
** does both. What is supported, the opcode mapping and the custom-call costs
** are in docs/hlo.md.
**
** Errors: every function that can fail reports "file:line:col: message" to
** dg and returns NULL; bad input never crashes. No global state: modules and
** graphs are owned by the caller.
*/
#ifndef TPUSIM_HLO_H
#define TPUSIM_HLO_H

#include <stddef.h>
#include <stdint.h>

#include "../base/diag.h"
#include "graph.h"

typedef struct hlo_module hlo_module;

/* Parses HLO text (len bytes, need not be NUL-terminated; copied). file is
** the name used in messages. NULL after reporting to dg. */
hlo_module *hlo_parse(const char *file, const char *text, size_t len, diag *dg);
void hlo_module_free(hlo_module *m);

/* Builds the graph of m's ENTRY computation. NULL after reporting to dg. */
graph *hlo_build(const hlo_module *m, diag *dg);

/* hlo_parse + hlo_build: the graph of the ENTRY computation with every called
** computation inlined; NULL after reporting to dg with file:line:col. */
graph *hlo_import(const char *file, const char *text, size_t len, diag *dg);
/* Reads path (at most 256 MiB) and imports it. */
graph *hlo_import_file(const char *path, diag *dg);

/* The devices a module is compiled for: num_partitions x replica_count on
** its HloModule line (each 1 when absent). */
int64_t hlo_devices(const char *text, size_t len);

/* ---- what was parsed (for tests and `graph` summaries) ---- */

const char *hlo_module_name(const hlo_module *m);
int hlo_computation_count(const hlo_module *m);
/* Instructions in all computations, ROOTs and parameters included. */
int hlo_instruction_count(const hlo_module *m);
/* Instructions with this opcode ("dot", "all-gather"), in all computations. */
int hlo_opcode_count(const hlo_module *m, const char *opcode);
/* The trip count hlo_build derives for the while instruction named name
** (without '%'), or -1 when there is no such while or none can be derived. */
int64_t hlo_while_trip_count(const hlo_module *m, const char *name);

#endif
