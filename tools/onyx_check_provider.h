/*
 * onyx-check-provider: what the ABI-neutral half (onyx_check_provider.c: reports,
 * ELF exports, isolation, random data, comparison, allocation counting) offers the
 * ABI half (onyx_check_provider_abi.c: everything that names an ABI struct), and what
 * the ABI half offers back. A new ABI version replaces the ABI half alone.
 */
#ifndef ONYX_TOOLS_CHECK_PROVIDER_H
#define ONYX_TOOLS_CHECK_PROVIDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onyx_abi.h"

/* ------------------------------------------------------------ the neutral half */

/* One finding: "ok", "FAIL" or "skip", the check's name and what was seen. Counted
 * into the summary; printf-style. */
void chk_ok(const char *check, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void chk_fail(const char *check, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void chk_skip(const char *check, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A heading for the findings that follow (a kernel). */
void chk_section(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Runs fn(arg) in a child process, so that a crash is a finding rather than the end
 * of the check: returns true when it returned, false (with `what` and the signal
 * reported as a failure) when it died. Findings the child reports are counted. */
bool chk_isolated(const char *what, void (*fn)(void *arg), void *arg);

/* Fresh random tensor data for `dtype` (never all zeros): floats in [-1, 1) without
 * 0, integers in [1, 3], bools mixed. `bytes` of storage at `data`. */
void chk_fill_random(uint32_t dtype, void *data, size_t elements);
/* Output comparison: dtype-fitting tolerances (float32 rtol 1e-4 / atol 1e-5, 16-bit
 * floats 1e-2, integers exact). Writes the worst element into `why` on a mismatch. */
bool chk_close(uint32_t dtype, const void *got, const void *want, size_t elements, char *why,
               size_t cap);

/* Heap allocations (malloc, calloc, realloc, aligned) made by the calling thread while
 * counting is on; false from chk_alloc_counting when this build cannot count (a
 * sanitizer owns malloc). */
bool chk_alloc_counting(void);
void chk_alloc_count_begin(void);
/* Counting off for what the check does on the kernel's behalf during compute (an
 * output in device memory), then back as it was. */
bool chk_alloc_count_suspend(void);
void chk_alloc_count_restore(bool was);
/* Host memory of the check itself (outputs, views, the host table's mem_alloc): never
 * counted. posix_memalign rules; free() releases it. */
void *chk_alloc_untracked(size_t alignment, size_t size);
uint64_t chk_alloc_count_end(void);

/* ------------------------------------------------------------ the ABI half */

typedef struct chk_options {
  const char *path;      /* the provider library */
  const char *reference; /* the CPU reference provider, or NULL for none */
  int threads;           /* determinism: threads that run one case at once */
} chk_options;

/* Loads the provider, checks negotiation, tables, NULL-safety and probe, then each
 * kernel (a case found for its type constraint; workspace contract; determinism;
 * allocations; conformance against the reference). Findings go through chk_*. */
void chk_provider(const chk_options *options);

#endif /* ONYX_TOOLS_CHECK_PROVIDER_H */
