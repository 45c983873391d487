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
 *
 * qs_calloc of such a block maps it from the kernel (mem_zero_map) instead:
 * fresh anonymous pages read as zero, so nothing is written and a page is only
 * made resident when it is first used.  A memset of an eval's 565 MB inference
 * arena faulted every page in on one thread before the first forward (~0.8 s
 * of a 1B ARC eval's 4.8 s, 420 MB of its peak RSS for pages it never used).
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
#define MEM_MAP_HEADER ((size_t)4096)   /* mem_zero_map's header page: its offset */

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

/* Advice for the user memory [p, p + bytes) of a block on a 2 MiB boundary:
 * its whole huge pages, and the last partial one when the block fills at least
 * half of it (mem_huge_alloc). */
static void mem_huge_advise(unsigned char *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    size_t span = (bytes + MEM_HUGE_PAGE - 1) / MEM_HUGE_PAGE * MEM_HUGE_PAGE;
    size_t whole = bytes / MEM_HUGE_PAGE * MEM_HUGE_PAGE;
    size_t advised = bytes - whole >= MEM_HUGE_PAGE / 2 ? span : whole;
    if (advised) /* advice only: failure is harmless */
        (void)madvise(p, advised, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

/* Header of a block, in the 64 bytes before its user memory: the requested
 * size and the distance back to what aligned_alloc returned (MEM_MAP_HEADER:
 * the start of mem_zero_map's mapping). */
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
    mem_huge_advise(base + MEM_HUGE_PAGE, bytes);
#ifdef MADV_NOHUGEPAGE
    /* the header's 2 MiB: never a huge page, even where THP is "always" */
    (void)madvise(base, MEM_HUGE_PAGE, MADV_NOHUGEPAGE);
#endif
    return base + MEM_HUGE_PAGE;
}

/* A zeroed block of MEM_HUGE_MIN bytes or more, mapped from the kernel: user
 * memory on a 2 MiB boundary with the header in the one 4 KiB page before it,
 * the rest of the over-sized mapping unmapped again.  qs_free unmaps it
 * (offset MEM_MAP_HEADER).  NULL on failure. */
#ifndef __SANITIZE_ADDRESS__   /* under ASan qs_calloc stays qs_malloc + memset */
static unsigned char *mem_zero_map(size_t bytes)
{
    size_t span = (bytes + MEM_HUGE_PAGE - 1) / MEM_HUGE_PAGE * MEM_HUGE_PAGE;
    if (span > SIZE_MAX - 2 * MEM_HUGE_PAGE)
        return NULL;
    size_t len = span + 2 * MEM_HUGE_PAGE;
    unsigned char *raw =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    uintptr_t at = ((uintptr_t)raw + MEM_MAP_HEADER + MEM_HUGE_PAGE - 1) &
                   ~(uintptr_t)(MEM_HUGE_PAGE - 1);
    unsigned char *user = (unsigned char *)at, *head = user - MEM_MAP_HEADER, *end = user + span;
    if (head > raw)
        (void)munmap(raw, (size_t)(head - raw));
    if (raw + len > end)
        (void)munmap(end, (size_t)(raw + len - end));
    mem_huge_advise(user, bytes);
    return user;
}
#endif

/* A block's user memory (NULL passes through) given its header and counted. */
static void *mem_block_start(unsigned char *user, size_t bytes, size_t offset)
{
    if (!user)
        return NULL;
    mem_header h = {bytes, offset};
    memcpy(user - MEM_ALIGN, &h, sizeof h);
    mem_count(bytes);
    return user;
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
    return mem_block_start(user, bytes, offset);
}

void *qs_calloc(size_t n, size_t elem_bytes)
{
    if (elem_bytes && n > SIZE_MAX / elem_bytes)
        return NULL;
    size_t bytes = n * elem_bytes;
#ifndef __SANITIZE_ADDRESS__   /* under ASan: qs_malloc + memset, which it checks */
    if (bytes >= MEM_HUGE_MIN && !atomic_load(&mem_huge_off)) {
        if (mem_should_fail())
            return NULL;
        /* zero already: not written */
        return mem_block_start(mem_zero_map(bytes), bytes, MEM_MAP_HEADER);
    }
#endif
    void *p = qs_malloc(bytes);
    if (p)
        memset(p, 0, bytes);
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
    if (h.offset == MEM_MAP_HEADER) {   /* mem_zero_map */
        size_t span = (h.bytes + MEM_HUGE_PAGE - 1) / MEM_HUGE_PAGE * MEM_HUGE_PAGE;
        (void)munmap((unsigned char *)p - MEM_MAP_HEADER, MEM_MAP_HEADER + span);
        return;
    }
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
