/* mem.h: the one door for heap memory.
 *
 * Every allocation in src/ goes through qs_malloc/qs_calloc/qs_realloc (make lint
 * rejects raw malloc elsewhere).  They count live bytes (for the peak-memory
 * figures `inspect` predicts and benchmarks measure) and have a test hook that
 * makes the Nth allocation fail, so OOM paths are exercised.
 * User memory is 64-byte aligned (cache line, AVX-512 vector); blocks of 4 MiB
 * or more start on a 2 MiB boundary (their header in the 4 KiB page before it)
 * and are advised as transparent huge pages (see mem.c); qs_calloc maps such
 * blocks from the kernel, zero without being written, each page resident only
 * once it is used.
 */
#ifndef QS_MEM_H
#define QS_MEM_H

#include <stddef.h>

void *qs_malloc(size_t bytes);               /* NULL on failure (or injected failure) */
void *qs_calloc(size_t n, size_t elem_bytes); /* zeroed; overflow-checked */
void *qs_realloc(void *p, size_t bytes);
void qs_free(void *p);                        /* accepts NULL */
char *qs_strdup(const char *s);
/* Room for `need` elements of elem_bytes in a growing array p of capacity *cap:
 * p itself when *cap >= need, else p reallocated to the first capacity of the
 * doubling series from *cap (or from `first` when *cap is 0) that holds need,
 * with *cap updated.  NULL on failure or overflow: p and *cap stay as they were.
 *   item *grown = qs_grow(a->items, &a->cap, a->n + 1, sizeof *grown, 64);
 *   if (!grown) return QS_ENOMEM;
 *   a->items = grown; */
void *qs_grow(void *p, size_t *cap, size_t need, size_t elem_bytes, size_t first);

size_t qs_mem_live_bytes(void);   /* bytes currently allocated through qs_* */
size_t qs_mem_peak_bytes(void);   /* high-water mark since start or last reset */
void qs_mem_reset_peak(void);

/* Test hook: the n-th allocation from now (1-based) fails; 0 disables. */
void qs_mem_fail_after(long n);

/* Huge-page placement of blocks >= 4 MiB: on by default; 0 turns it off for
 * later allocations (A/B benchmarks, QS_HUGEPAGES=0 in the CLI). */
void qs_mem_set_hugepages(int on);

#endif
