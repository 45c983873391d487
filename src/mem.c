/* mem.c: counted, aligned allocation with an OOM-injection hook.
 *
 * Each block carries a 64-byte header holding its size, so qs_free knows how many
 * bytes to un-count and user memory stays 64-byte aligned.  Counters are atomics:
 * allocation may happen from OpenMP threads (never in hot loops, by design).
 */
#include "qs/mem.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MEM_ALIGN 64

static atomic_size_t mem_live;
static atomic_size_t mem_peak;
static atomic_long mem_fail_countdown;

static int mem_should_fail(void)
{
    long n = atomic_load(&mem_fail_countdown);
    while (n > 0) {
        if (atomic_compare_exchange_weak(&mem_fail_countdown, &n, n - 1))
            return n == 1;
    }
    return 0;
}

static void mem_count(size_t bytes)
{
    size_t live = atomic_fetch_add(&mem_live, bytes) + bytes;
    size_t peak = atomic_load(&mem_peak);
    while (live > peak && !atomic_compare_exchange_weak(&mem_peak, &peak, live))
        ;
}

void *qs_malloc(size_t bytes)
{
    if (mem_should_fail() || bytes > SIZE_MAX - 2 * MEM_ALIGN)
        return NULL;
    size_t total = (bytes + MEM_ALIGN + MEM_ALIGN - 1) / MEM_ALIGN * MEM_ALIGN;
    unsigned char *base = aligned_alloc(MEM_ALIGN, total);
    if (!base)
        return NULL;
    memcpy(base, &bytes, sizeof bytes);
    mem_count(bytes);
    return base + MEM_ALIGN;
}

void *qs_calloc(size_t n, size_t elem_bytes)
{
    if (elem_bytes && n > SIZE_MAX / elem_bytes)
        return NULL;
    void *p = qs_malloc(n * elem_bytes);
    if (p)
        memset(p, 0, n * elem_bytes);
    return p;
}

static size_t mem_block_bytes(const void *p)
{
    size_t bytes;
    memcpy(&bytes, (const unsigned char *)p - MEM_ALIGN, sizeof bytes);
    return bytes;
}

void *qs_realloc(void *p, size_t bytes)
{
    if (!p)
        return qs_malloc(bytes);
    void *q = qs_malloc(bytes);
    if (!q)
        return NULL;
    size_t old = mem_block_bytes(p);
    memcpy(q, p, old < bytes ? old : bytes);
    qs_free(p);
    return q;
}

void qs_free(void *p)
{
    if (!p)
        return;
    atomic_fetch_sub(&mem_live, mem_block_bytes(p));
    free((unsigned char *)p - MEM_ALIGN);
}

char *qs_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = qs_malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

size_t qs_mem_live_bytes(void) { return atomic_load(&mem_live); }
size_t qs_mem_peak_bytes(void) { return atomic_load(&mem_peak); }
void qs_mem_reset_peak(void) { atomic_store(&mem_peak, atomic_load(&mem_live)); }
void qs_mem_fail_after(long n) { atomic_store(&mem_fail_countdown, n); }
