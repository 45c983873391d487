/* bench_scale_load.h: bench_scale's load section: the 1B checkpoint loaded
 * into bf16 packs, the model hash alone (no hash cache; as the page cache
 * finds the files, then from it), again from the hash cache,
 * and as a first evaluation finds it for this checkpoint, which `init` wrote
 * with the bench's hash cache on (SCALE_WRITTEN_CACHE: the writer records the
 * hash as it writes).  Included by bench_scale.c after its helpers (scale_ctx,
 * now_s, loadavg_print, SCALE_DIR, SCALE_WRITTEN_CACHE). */
#ifndef QS_BENCH_SCALE_LOAD_H
#define QS_BENCH_SCALE_LOAD_H

static int scale_hash_paths(char paths[2][700])
{
    snprintf(paths[0], 700, "%s/config.json", SCALE_DIR);
    snprintf(paths[1], 700, "%s/model.safetensors", SCALE_DIR);
    return 2;
}

static void scale_load_section(scale_ctx *x)
{
    printf("\n== load (bf16 packs, model hash)\n");
    loadavg_print("before");
    char paths[2][700];
    const char *pp[2] = {paths[0], paths[1]};
    int n = scale_hash_paths(paths);
    qs_diag d = {0};
    llama_model m;
    /* twice: as the page cache finds the files (after the other benches they
     * may be on disk only: that read is the disk's speed, 6.6 s against 1.5
     * on a Zen 4 VM), then from the cache (the hash's own cost) */
    double t0 = now_s(), found_s = 0.0;
    char hex[2][65];
    for (int r = 0; r < 2; r++) {
        digest_files_job *j = NULL;
        t0 = now_s();
        if (digest_sha256_files_start(&j, pp, n, &d) || digest_sha256_files_finish(j, hex, &d)) {
            printf("  hash failed: %s\n", d.msg);
            return;
        }
        found_s = r ? found_s : now_s() - t0;
    }
    x->hash_s = now_s() - t0;
    t0 = now_s();
    if (model_load_packed(&m, SCALE_DIR, MATMUL_BF16, &d)) {
        printf("  load failed: %s\n", d.msg);
        return;
    }
    x->load_s = now_s() - t0;
    int packed = m.weights_packed;
    size_t bytes = 0;
    for (int i = 0; i < m.cfg.n_layers * MODEL_LIN_COUNT + 1; i++)
        bytes += matmul_wpack_bytes(m.packs[i]);
    model_free(&m);
    printf("  load %.2f s: weights only in bf16 packs: %s (%.2f GB of packs)\n", x->load_s,
           packed ? "yes" : "no (fallback)", bytes / 1e9);
    printf("  model hash alone %.2f s on one thread, the files in the page cache (%.2f s as the "
           "cache found them; SHA extensions: %s; no hash cache)\n", x->hash_s, found_s,
           digest_sha256_accelerated() ? "yes" : "no");
    /* the same checkpoint evaluated again: its hash comes from the cache */
    char cache[700];
    snprintf(cache, sizeof cache, "build/scale/hash_cache.tsv");
    remove(cache);
    setenv("QS_HASH_CACHE", cache, 1);
    digest_cache_store(paths[1], hex[1]);
    t0 = now_s();
    digest_files_job *j = NULL;
    int ok = !digest_sha256_files_start(&j, pp, n, &d) && !digest_sha256_files_finish(j, hex, &d);
    x->hash_cached_s = now_s() - t0;
    int hit = digest_cache_lookup(paths[1], hex[0]);
    setenv("QS_HASH_CACHE", "off", 1);
    remove(cache);
    if (ok && hit)
        printf("  model hash again, from the hash cache: %.3f s\n", x->hash_cached_s);
    else
        printf("  model hash cache: not used (the checkpoint was modified in the last 2 s?)\n");
    /* the first evaluation of this checkpoint: init recorded its hash as it wrote it */
    char written[2][65];
    setenv("QS_HASH_CACHE", SCALE_WRITTEN_CACHE, 1);
    hit = digest_cache_lookup(paths[1], written[1]);
    t0 = now_s();
    ok = !digest_sha256_files_start(&j, pp, n, &d) && !digest_sha256_files_finish(j, written, &d);
    double t_written = now_s() - t0;
    setenv("QS_HASH_CACHE", "off", 1);
    if (ok && hit && !strcmp(written[1], hex[1])) {
        x->hash_written_s = t_written > 1e-6 ? t_written : 1e-6;
        printf("  model hash as a first eval finds it: recorded by init as it wrote the checkpoint, "
               "%.3f s (the same hash as read back)\n", x->hash_written_s);
    } else {
        printf("  model hash recorded by init: %s (to measure it: rm -r %s; the bench rebuilds "
               "it)\n", ok && hit ? "DIFFERS from the bytes" : "absent (built without it)",
               SCALE_DIR);
    }
    loadavg_print("after");
}

#endif
