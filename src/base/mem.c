/* mem.c: counted, aligned allocation with an OOM-injection hook.
 *
 * Each block carries a 64-byte header holding its size, so qs_free knows how many
 * bytes to un-count and user memory stays 64-byte aligned.  Counters are atomics:
 * allocation may happen from OpenMP threads (never in hot loops, by design).
 *
 * Blocks of MEM_HUGE_MIN bytes or more (weights, gradients, optimizer moments,
 * activations, packs) start on a 2 MiB boundary and are advised as transparent
 * huge pages (madvise MADV_HUGEPAGE, honoured when THP is "madvise" or
 * "always").  On a VM every TLB miss is a two-level page walk; with 4 KiB pages
 * a training step over a few hundred MB of buffers ran 15-40% slower and its
 * time moved by +-15% between identical trainers depending on where their pages
 * landed (bench_train, README "### train").
 */
#include "qs/mem.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MEM_ALIGN 64
#define MEM_HUGE_PAGE ((size_t)2 << 20)
#define MEM_HUGE_MIN ((size_t)4 << 20)

static atomic_size_t mem_live;
static atomic_size_t mem_peak;
static atomic_long mem_fail_countdown;
static atomic_int mem_huge_off;

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
    unsigned char *base;
    if (total >= MEM_HUGE_MIN && !atomic_load(&mem_huge_off)) {
        total = (total + MEM_HUGE_PAGE - 1) / MEM_HUGE_PAGE * MEM_HUGE_PAGE;
        base = aligned_alloc(MEM_HUGE_PAGE, total);
#ifdef MADV_HUGEPAGE
        if (base)
            (void)madvise(base, total, MADV_HUGEPAGE);   /* advice only: failure is harmless */
#endif
    } else
        base = aligned_alloc(MEM_ALIGN, total);
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

void *qs_grow(void *p, size_t *cap, size_t need, size_t elem_bytes, size_t first)
{
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap : first ? first : 1;
    while (c < need) {
        if (c > SIZE_MAX / 2)
            return NULL;
        c *= 2;
    }
    if (elem_bytes && c > SIZE_MAX / elem_bytes)
        return NULL;
    void *q = qs_realloc(p, c * elem_bytes);
    if (q)
        *cap = c;
    return q;
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
void qs_mem_set_hugepages(int on) { atomic_store(&mem_huge_off, !on); }
