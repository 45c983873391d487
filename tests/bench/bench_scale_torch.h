/* bench_scale_torch.h: bench_scale's PyTorch baseline for the forward section:
 * tools/bench_torch_scale.py on the scorer's batches (tuned: libtcmalloc_minimal
 * preloaded when installed, OMP_WAIT_POLICY=PASSIVE), our forward timed again
 * right after it, and the ratio over the mean of our passes before and after.
 * Included by bench_scale.c after scale_forward_pass (uses scale_ctx, REPS,
 * TCMALLOC, SCALE_DIR, FWD_SEQS, now_s, cmp_double). */
#ifndef QS_BENCH_SCALE_TORCH_H
#define QS_BENCH_SCALE_TORCH_H

/* PyTorch's forward over the batches written to `batches` (x->torch_tps). */
static void scale_torch(scale_ctx *x, const char *batches)
{
    int tc = access(TCMALLOC, R_OK) == 0;
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s%s OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 tools/bench_torch_scale.py %s %s %d 2 "
             "2>&1", tc ? "LD_PRELOAD=" : "", tc ? TCMALLOC : "", SCALE_DIR, batches, REPS);
    FILE *p = popen(cmd, "r");
    char line[512];
    double sec;
    while (p && fgets(line, sizeof line, p)) {
        if (!strncmp(line, "setup ", 6))
            printf("  PyTorch %s", line + 6);
        else if (sscanf(line, "torch bf16 %lf %lf", &sec, &x->torch_tps) != 2)
            printf("  torch: %s", line);
    }
    if (p)
        pclose(p);
    if (!tc)
        printf("  (libtcmalloc-minimal4 not installed: PyTorch ran with glibc malloc)\n");
}

/* Tokens/s of REPS forward passes over the batches (median), -1 on failure. */
static double scale_forward_rate(llama_model *m, const fwd_batch *bt, int nb, int rows,
                                 double tokens)
{
    llama_acts a;
    qs_diag d = {0};
    if (model_acts_init_infer(&a, &m->cfg, rows, rows, FWD_SEQS, 0, &d))
        return -1;
    double t[REPS];
    for (int r = 0; r < REPS && !d.code; r++) {
        double t0 = now_s();
        scale_forward_pass(m, &a, bt, nb, &d);
        t[r] = now_s() - t0;
    }
    a.logits_first = a.logits_rows = NULL;
    model_acts_free(&a);
    if (d.code)
        return -1;
    qsort(t, REPS, sizeof *t, cmp_double);
    return tokens / t[REPS / 2];
}

/* Ours against PyTorch: the mean of our passes before and right after its run
 * (a drift of the host's speed between the two cancels to first order). */
static double scale_ours_vs_torch(const scale_ctx *x)
{
    return x->fwd_after_tps > 0 ? 0.5 * (x->fwd_tps + x->fwd_after_tps) : x->fwd_tps;
}

static double scale_amx_vs_torch(const scale_ctx *x)
{
    return x->amx_after_tps > 0 ? 0.5 * (x->amx_tps + x->amx_after_tps) : x->amx_tps;
}

#endif
