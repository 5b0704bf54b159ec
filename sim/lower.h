/*
** lower.h -- lowering fused ops through LLVM (issue 7 builds it out).
**
** Every LLVM C API call in tpusim lives behind this header, so the rest of
** the simulator neither includes LLVM headers nor links against it directly.
*/
#ifndef TPUSIM_LOWER_H
#define TPUSIM_LOWER_H

#include <stddef.h>

/* "19.1.7": the LLVM the binary is linked against. */
void lower_llvm_version(char *buf, size_t n);

#endif
