/* bench_scale_amx.h: bench_scale's forward section at --precision bf16-amx (the
 * opt-in AMX precision, include/qs/matmul.h): the scorer's batches through a
 * second model packed for it.  Included by bench_scale.c after its helpers
 * (scale_ctx, fwd_batch, now_s, cmp_double, REPS, FWD_SEQS, SCALE_DIR). */
#ifndef QS_BENCH_SCALE_AMX_H
#define QS_BENCH_SCALE_AMX_H

/* The batches through a second model packed for bf16-amx: median pass, tokens/s. */
static void scale_forward_amx(scale_ctx *x, const fwd_batch *bt, int nb, int rows, double tokens)
{
    if (!cpu_amx_bf16()) {
        printf("  bf16-amx: this CPU has no AMX (needs AMX-BF16 and AMX-TILE)\n");
        return;
    }
    llama_model ma;
    llama_acts a;
    qs_diag d = {0};
    if (model_load_packed(&ma, SCALE_DIR, MATMUL_BF16_AMX, &d)) {
        printf("  bf16-amx: %s\n", d.msg);
        return;
    }
    double t[REPS];
    if (!model_acts_init_infer(&a, &ma.cfg, rows, rows, FWD_SEQS, 0, &d)) {
        for (int r = 0; r < REPS; r++) {
            double t0 = now_s();
            for (int i = 0; i < nb && !d.code; i++) {
                model_acts_view(&a, &ma.cfg, bt[i].B, bt[i].T, bt[i].T, &d);
                a.logits_first = bt[i].last;
                a.logits_rows = bt[i].ones;
                model_forward(&ma, &a, bt[i].tok, NULL, bt[i].B, bt[i].T, 0, &d);
            }
            t[r] = now_s() - t0;
        }
        a.logits_first = a.logits_rows = NULL;
        model_acts_free(&a);
    }
    model_free(&ma);
    if (d.code) {
        printf("  bf16-amx: %s\n", d.msg);
        return;
    }
    qsort(t, REPS, sizeof *t, cmp_double);
    x->amx_tps = tokens / t[REPS / 2];
    printf("  bf16-amx (AMX tiles): median %.2f s per pass, %.0f tokens/s = %.2fx bf16\n",
           t[REPS / 2], x->amx_tps, x->amx_tps / x->fwd_tps);
}

#endif
