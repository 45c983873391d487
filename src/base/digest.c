/* digest.c: SHA-256 written from FIPS 180-4 (no third-party code).
 *
 * Whole blocks are compressed by the portable code below or, when the CPU has
 * the x86 SHA extensions (CPUID leaf 7 EBX bit 29, with SSSE3 and SSE4.1) and
 * cpu_level() is not capped to scalar, by digest_shani.c: about 8x faster
 * (1.3 GB/s against 0.16 GB/s of CPU time on the shared Xeon).  Both give the
 * same state for the same blocks (tests/test_digest.c: NIST vectors, random
 * lengths and split points, both paths).  Input is compressed straight from the
 * caller's buffer when no partial block is pending.
 *
 * Background hashing (digest_sha256_files_*): one POSIX thread hashes a list of
 * files in order while the caller works; without a thread (creation failed)
 * the files are hashed in _finish instead, with the same result.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "digest_impl.h"
#include "qs/cpu.h"
#include "qs/digest.h"
#include "qs/mem.h"

const uint32_t digest_k_impl[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

#define DIGEST_ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void digest_block(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = DIGEST_ROR(w[i - 15], 7) ^ DIGEST_ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = DIGEST_ROR(w[i - 2], 17) ^ DIGEST_ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], dd = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = hh + (DIGEST_ROR(e, 6) ^ DIGEST_ROR(e, 11) ^ DIGEST_ROR(e, 25)) +
                      ((e & f) ^ (~e & g)) + digest_k_impl[i] + w[i];
        uint32_t t2 = (DIGEST_ROR(a, 2) ^ DIGEST_ROR(a, 13) ^ DIGEST_ROR(a, 22)) +
                      ((a & b) ^ (a & c) ^ (b & c));
        hh = g;
        g = f;
        f = e;
        e = dd + t1;
        dd = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += dd;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
}

/* 1 when the SHA-extension path may run: the CPU has it and QS_CPU / cpu_limit
 * does not ask for the scalar code.  CPUID is asked once: in a virtual machine
 * each CPUID is a trap to the hypervisor (~2 us), which made updates of a few
 * KB (a writer hashing what it writes) run at a third of the hash's speed. */
static int digest_use_shani(void)
{
#if defined(__x86_64__) || defined(__i386__)
    static int has = -1;   /* same value from every thread: a benign race */
    int h = __atomic_load_n(&has, __ATOMIC_RELAXED);
    if (h < 0) {
        unsigned a, b, c, d;
        h = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29)) &&
            __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 9)) && (c & (1u << 19)); /* SSSE3, SSE4.1 */
        __atomic_store_n(&has, h, __ATOMIC_RELAXED);
    }
    return h && cpu_level() > CPU_LEVEL_SCALAR;
#else
    return 0;
#endif
}

static void digest_blocks(uint32_t h[8], const unsigned char *p, size_t n_blocks, int shani)
{
#if defined(__x86_64__) || defined(__i386__)
    if (shani) {
        digest_sha256_blocks_shani_impl(h, p, n_blocks);
        return;
    }
#endif
    (void)shani;
    for (size_t i = 0; i < n_blocks; i++)
        digest_block(h, p + 64 * i);
}

int digest_sha256_accelerated(void) { return digest_use_shani(); }

void digest_sha256_init(digest_sha256 *s)
{
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof h0);
    s->total_bytes = 0;
    s->buf_bytes = 0;
}

void digest_sha256_update(digest_sha256 *s, const void *data, size_t bytes)
{
    const unsigned char *p = data;
    const int shani = bytes >= 64 || s->buf_bytes + bytes >= 64 ? digest_use_shani() : 0;
    s->total_bytes += bytes;
    if (s->buf_bytes) {   /* complete the pending block first */
        size_t take = 64 - s->buf_bytes < bytes ? 64 - s->buf_bytes : bytes;
        memcpy(s->buf + s->buf_bytes, p, take);
        s->buf_bytes += take;
        p += take;
        bytes -= take;
        if (s->buf_bytes < 64)
            return;
        digest_blocks(s->h, s->buf, 1, shani);
        s->buf_bytes = 0;
    }
    digest_blocks(s->h, p, bytes / 64, shani);   /* whole blocks in place */
    p += bytes / 64 * 64;
    bytes %= 64;
    memcpy(s->buf, p, bytes);
    s->buf_bytes = bytes;
}

void digest_sha256_final(digest_sha256 *s, char hex[65])
{
    uint64_t bits = s->total_bytes * 8;
    unsigned char pad[72] = {0x80};
    size_t npad = (s->buf_bytes < 56 ? 56 : 120) - s->buf_bytes;
    for (int i = 0; i < 8; i++)
        pad[npad + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
    digest_sha256_update(s, pad, npad + 8);
    for (int i = 0; i < 8; i++)
        snprintf(hex + 8 * i, 9, "%08x", s->h[i]);
}

int digest_sha256_file(const char *path, char hex[65], qs_diag *d)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return diag_set(d, QS_EIO, path, -1, "cannot open: %s", strerror(errno));
    digest_sha256 s;
    digest_sha256_init(&s);
    unsigned char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        digest_sha256_update(&s, buf, n);
    int bad = ferror(f);
    fclose(f);
    if (bad)
        return diag_set(d, QS_EIO, path, -1, "read error");
    digest_sha256_final(&s, hex);
    return 0;
}

/* ---- background hashing of a list of files ----
 *
 * The hash is wanted only when results.json is written, so its thread runs at
 * the lowest priority (nice 19, Linux: per thread): on a machine whose cores
 * are busy scoring it takes the idle moments (barrier waits, the scorer's
 * serial parts) instead of slowing the forward passes.  Files are read in
 * DIGEST_CHUNK pieces, each under the job's lock; _finish sets stop, the thread
 * leaves at the next piece boundary, and the caller hashes what is left at its
 * own priority (a nice-19 thread could starve behind other processes). */

enum { DIGEST_CHUNK = 1 << 20 };

struct digest_files_job {
    pthread_t thread;
    int threaded;          /* 1: the thread runs (join it) */
    int n;
    char **paths;          /* [n] copies */
    char (*hex)[65];       /* [n] results */
    int rc;                /* the first error, its diag in d */
    qs_diag d;
    pthread_mutex_t mu;    /* the state below moves under it */
    int stop;              /* _finish: background work ends at the next piece */
    int next;              /* the file being hashed, or the next one */
    FILE *f;               /* next's open file while it is read, else NULL */
    digest_sha256 sha;     /* next's hash so far */
    unsigned char *buf;    /* [DIGEST_CHUNK] */
};

/* One step of the job: a whole file from the cache, or one piece of a file.
 * Returns 1 while there is work left. */
static int digest_files_step(digest_files_job *j)
{
    if (j->rc || j->next >= j->n)
        return 0;
    const char *path = j->paths[j->next];
    if (!j->f) {
        if (digest_known_impl(path, DIGEST_CACHE_MIN_BYTES, j->hex[j->next])) {
            j->next++;
            return j->next < j->n;
        }
        if (!(j->f = fopen(path, "rb"))) {
            j->rc = diag_set(&j->d, QS_EIO, path, -1, "cannot open: %s", strerror(errno));
            return 0;
        }
        digest_sha256_init(&j->sha);
    }
    size_t got = fread(j->buf, 1, DIGEST_CHUNK, j->f);
    digest_sha256_update(&j->sha, j->buf, got);
    if (got == DIGEST_CHUNK)
        return 1;
    int bad = ferror(j->f);
    fclose(j->f);
    j->f = NULL;
    if (bad) {
        j->rc = diag_set(&j->d, QS_EIO, path, -1, "read error");
        return 0;
    }
    digest_sha256_final(&j->sha, j->hex[j->next]);
    digest_remember_impl(path, DIGEST_CACHE_MIN_BYTES, j->hex[j->next]);
    j->next++;
    return j->next < j->n;
}

static void *digest_files_run(void *arg)
{
    digest_files_job *j = arg;
#ifdef __linux__
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);   /* best effort */
#endif
    for (int more = 1; more;) {
        pthread_mutex_lock(&j->mu);
        more = !j->stop && digest_files_step(j);
        pthread_mutex_unlock(&j->mu);
    }
    return NULL;
}

static void digest_files_free(digest_files_job *j)
{
    for (int i = 0; i < j->n; i++)
        qs_free(j->paths[i]);
    if (j->f)
        fclose(j->f);
    qs_free(j->paths);
    qs_free(j->hex);
    qs_free(j->buf);
    pthread_mutex_destroy(&j->mu);
    qs_free(j);
}

int digest_sha256_files_start(digest_files_job **out, const char *const *paths, int n, qs_diag *d)
{
    *out = NULL;
    digest_files_job *j = qs_calloc(1, sizeof *j);
    if (j) {
        pthread_mutex_init(&j->mu, NULL);
        j->paths = qs_calloc(n > 0 ? (size_t)n : 1, sizeof *j->paths);
        j->hex = qs_calloc(n > 0 ? (size_t)n : 1, sizeof *j->hex);
        j->buf = qs_malloc(DIGEST_CHUNK);
    }
    if (!j || !j->paths || !j->hex || !j->buf) {
        if (j)
            digest_files_free(j);
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    }
    for (int i = 0; i < n; i++, j->n++)
        if (!(j->paths[i] = qs_strdup(paths[i]))) {
            digest_files_free(j);
            return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
        }
    j->threaded = pthread_create(&j->thread, NULL, digest_files_run, j) == 0;
    *out = j;
    return 0;
}

int digest_sha256_files_finish(digest_files_job *j, char (*hex)[65], qs_diag *d)
{
    if (!j)
        return 0;
    if (j->threaded) {
        pthread_mutex_lock(&j->mu);
        j->stop = 1;
        pthread_mutex_unlock(&j->mu);
        pthread_join(j->thread, NULL);
    }
    while (digest_files_step(j)) /* what is left, at the caller's priority */
        ;
    int rc = j->rc;
    if (rc && d)
        *d = j->d;
    for (int i = 0; !rc && hex && i < j->n; i++)
        memcpy(hex[i], j->hex[i], sizeof hex[i]);
    digest_files_free(j);
    return rc;
}
