/*
** lower.c -- see lower.h.
*/
#include "lower.h"

#include <stdio.h>

#include <llvm-c/Core.h>

void lower_llvm_version(char *buf, size_t n) {
  unsigned major, minor, patch;
  LLVMGetVersion(&major, &minor, &patch);
  snprintf(buf, n, "%u.%u.%u", major, minor, patch);
}
