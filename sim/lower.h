/*
** lower.h -- lowering graph ops to LLVM IR, and reading their cost back off
** the IR.
**
** Every LLVM C API call in tpusim lives behind this header, so the rest of
** the simulator neither includes LLVM headers nor links against it directly.
**
** An op becomes one LLVM function: a loop nest over its shape with loads,
** arithmetic and stores in its dtype (bf16 and fp16 stored as 16 bits and
** computed in f32, as the hardware's vector units do). lower_op_cost then
** walks that function and counts what it does -- floating-point
** instructions, transcendental calls, bytes loaded and stored per buffer --
** weighted by how often each basic block runs. The lowering records each
** block's execution count on its terminator as !tpusim.count metadata (the
** loops' trip counts multiplied out), so the count reads the IR alone. The
** rules are in docs/op-models.md.
**
** A lower_module owns its LLVM context and module; nothing is shared
** between modules, so two can be used from two threads.
*/
#ifndef TPUSIM_LOWER_H
#define TPUSIM_LOWER_H

#include <stdbool.h>
#include <stddef.h>

#include "../workloads/graph.h"

/* "19.1.7": the LLVM the binary is linked against. */
void lower_llvm_version(char *buf, size_t n);

typedef struct lower_module lower_module;

lower_module *lower_new(const char *name);
void lower_free(lower_module *m);

/* Whether lower_op handles this op (kind and dtypes); when it does not,
** why, in `why`: collectives ("all-reduce: a collective, timed by the
** network model (not lowered)"), custom-calls other than the four
** lower_op runs (opaque, declared costs),
** parameters and constants (buffers), s4 and fp8 values, and element
** functions a dtype lacks (no integer exp, no bitwise op on floats). */
bool lower_supported(const graph *g, int id, char *why, size_t n);

/* Lowers op `id` into a new function of the module and returns its index
** (0, 1, ...), or -1 with the reason in err. Every kind but collectives
** and custom-calls -- but the custom-calls tpusim's builders declare:
** conv-backward-input/filter (as their forward conv's transposed and
** weight-gradient forms), prefix-sum and row-partition --: elementwise (float, integer, pred), convert, dot and
** convolution (f32/f64 or s32/s64 accumulation), reduce, and data movement
** (broadcast, transpose, reshape -- an empty function: a bitcast --,
** slice, concatenate, pad, gather, scatter-add, dynamic-slice,
** dynamic-update-slice, iota). A dynamic-update-slice and a scatter work
** in place: the result buffer holds the operand on entry. */
int lower_op(lower_module *m, const graph *g, int id, char *err, size_t n);

/* Lowers a broadcast op (bf16, fp16, f32, f64) as a copy loop nest over
** the result: what an unfused XLA program pays to materialize one. Kept
** out of lower_op, which `tpusim lower` uses, because XLA fuses
** broadcasts into their users; calibration's softmax and layernorm run
** unfused and need it. Returns the function's index or -1 (err says why). */
int lower_broadcast(lower_module *m, const graph *g, int id, char *err, size_t n);

/* Lowers a fused kernel -- ops[0..n_ops) in graph order, the last one its
** output (a sim/fuse.h group) -- as one function: the root's loops, and
** inside them each member computed at the index its consumer needs, the
** intermediates kept in registers, only the root's result stored. This
** covers loop fusion (elementwise chains), input fusion (a reduce root
** whose operand is computed per element read), a dot or convolution with
** an elementwise epilogue (the accumulation loop inside the epilogue's),
** and absorbed broadcasts and iotas (computed at the mapped index). Members
** below the root must be computable at any index (elementwise, dot, conv,
** reduce, broadcast, reshape, transpose, slice, pad, gather, iota); each
** must be read by a later member. Arguments: the outside values in order
** of first use (each once), then the output. Each op's flops are counted
** in its own dtype. Returns the function's index or -1 (err says why). */
int lower_fused(lower_module *m, const graph *g, const int *ops, int n_ops, char *err,
                size_t n);

/* What the IR of function `fn` does, counted per the rules above:
** flops by dtype (an instruction tagged !tpusim.flop !{!"s32"} counts in
** the dtype it names; untagged floating-point arithmetic in the function's
** "tpusim.dtype"; untagged integer instructions and selects are index
** arithmetic and do not count), transcendentals, and HBM bytes read and
** written (per buffer, the smaller of the bytes accessed and the buffer's
** size: a buffer is read from HBM at most once, the roofline ideal -- but
** a buffer marked "tpusim.uncapped", a gather's table or a scatter's
** result, counts every access: the rows touched depend on the indices). `accessed`
** (may be NULL) gets the bytes the loads and stores touch without that
** cap -- what a kernel with no reuse would move. Returns 0, or -1 with the
** reason in err (a block without a count, an unknown call). */
int lower_op_cost(const lower_module *m, int fn, graph_cost *c, double *accessed, char *err,
                  size_t n);

/* The name LLVM gave function `fn`: the op's name, with "op." in front
** when the name alone is a C identifier (it could shadow a libm symbol). */
const char *lower_fn_name(const lower_module *m, int fn);

/* Checks the module with LLVM's verifier; 0, or -1 with its message. */
int lower_verify(lower_module *m, char *err, size_t n);

/* Runs the new pass manager's default<O1|O2|O3> pipeline (loop
** vectorization on) over the module, for the host CPU. Counting must happen
** before: optimization rewrites the loops and drops !tpusim.count. */
int lower_optimize(lower_module *m, int level, char *err, size_t n);

/* The module as LLVM assembly text (llvm-as accepts it); free() it. */
char *lower_print(const lower_module *m);

/* ---- running lowered code on this CPU (ORC LLJIT) ---- */

typedef struct lower_jit lower_jit;

/* Compiles a copy of the module (m stays usable); libm and the process's
** other symbols resolve the module's external calls (tanhf). */
lower_jit *lower_jit_new(const lower_module *m, char *err, size_t n);
void lower_jit_free(lower_jit *j);

/* The address of function `fn` of the module the JIT was made from: a
** void (*)(void *in0, ..., void *out) over the op's buffers in their
** storage formats (bf16 as uint16_t bits, fp16 as IEEE half bits, pred as
** one byte), then for a dynamic-slice or dynamic-update-slice one int64_t
** start index per dimension (clamped so the slice fits, as XLA does). */
void *lower_jit_lookup(lower_jit *j, const lower_module *m, int fn, char *err, size_t n);

#endif
