/* mem.c: counted, aligned allocation with an OOM-injection hook.
 *
 * Each block carries a 64-byte header holding its size (and where the block
 * starts), so qs_free knows how many bytes to un-count and user memory stays
 * 64-byte aligned.  Counters are atomics:
 * allocation may happen from OpenMP threads (never in hot loops, by design).
 *
 * Blocks of MEM_HUGE_MIN bytes or more (weights, gradients, optimizer moments,
 * activations, packs) start on a 2 MiB boundary (mem_huge_alloc) and are advised
 * as transparent huge pages (madvise MADV_HUGEPAGE, honoured when THP is "madvise" or
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

/* Header of a block, in the 64 bytes before its user memory: the requested
 * size and the distance back to what aligned_alloc returned. */
typedef struct mem_header {
    size_t bytes;
    size_t offset;
} mem_header;

/* A block of MEM_HUGE_MIN bytes or more: its user memory starts on a 2 MiB
 * boundary, one huge page past the allocation, with the header in the 4 KiB
 * page just before it (never advised, so 4 KiB resident, not 2 MiB).  With the
 * header first on the boundary, a block of whole huge pages (a 1B model's 18
 * MiB MLP pack) spilled 64 bytes into one more huge page: ~9% of a 1B model's
 * resident weights.  The header's 2 MiB is advised against huge pages; the
 * block's whole huge pages are advised for them, and the last partial one when
 * the block fills at least half of it (else that tail stays on 4 KiB pages: at
 * most 1 MiB of a block is not on huge pages).  Measured on the 1B shape: the
 * tail rule saves ~80 MB of generate's 2.4 GB peak RSS (k/v packs of 2.25 MiB);
 * a bf16 dim-768 training step was 0.3-1.0% slower with it than with every
 * huge page advised (3 alternating pairs, within the host's noise). */
static unsigned char *mem_huge_alloc(size_t bytes)
{
    size_t span = (bytes + MEM_HUGE_PAGE - 1) / MEM_HUGE_PAGE * MEM_HUGE_PAGE;
    if (span > SIZE_MAX - MEM_HUGE_PAGE)
        return NULL;
    unsigned char *base = aligned_alloc(MEM_HUGE_PAGE, span + MEM_HUGE_PAGE);
    if (!base)
        return NULL;
#ifdef MADV_HUGEPAGE
    size_t whole = bytes / MEM_HUGE_PAGE * MEM_HUGE_PAGE;
    size_t advised = bytes - whole >= MEM_HUGE_PAGE / 2 ? span : whole;
    if (advised) /* advice only: failure is harmless */
        (void)madvise(base + MEM_HUGE_PAGE, advised, MADV_HUGEPAGE);
#endif
#ifdef MADV_NOHUGEPAGE
    /* the header's 2 MiB: never a huge page, even where THP is "always" */
    (void)madvise(base, MEM_HUGE_PAGE, MADV_NOHUGEPAGE);
#endif
    return base + MEM_HUGE_PAGE;
}

void *qs_malloc(size_t bytes)
{
    if (mem_should_fail() || bytes > SIZE_MAX - 2 * MEM_ALIGN)
        return NULL;
    unsigned char *user;
    size_t offset;
    if (bytes >= MEM_HUGE_MIN && !atomic_load(&mem_huge_off)) {
        user = mem_huge_alloc(bytes);
        offset = MEM_HUGE_PAGE;
    } else {
        size_t total = (bytes + MEM_ALIGN + MEM_ALIGN - 1) / MEM_ALIGN * MEM_ALIGN;
        unsigned char *base = aligned_alloc(MEM_ALIGN, total);
        user = base ? base + MEM_ALIGN : NULL;
        offset = MEM_ALIGN;
    }
    if (!user)
        return NULL;
    mem_header h = {bytes, offset};
    memcpy(user - MEM_ALIGN, &h, sizeof h);
    mem_count(bytes);
    return user;
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

static mem_header mem_block_header(const void *p)
{
    mem_header h;
    memcpy(&h, (const unsigned char *)p - MEM_ALIGN, sizeof h);
    return h;
}

static size_t mem_block_bytes(const void *p) { return mem_block_header(p).bytes; }

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
    mem_header h = mem_block_header(p);
    atomic_fetch_sub(&mem_live, h.bytes);
    free((unsigned char *)p - h.offset);
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
