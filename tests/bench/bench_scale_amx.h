/* bench_scale_amx.h: bench_scale at --precision bf16-amx (the opt-in AMX
 * precision, include/qs/matmul.h): the scorer's batches through a second model
 * packed for it, and ARC-Easy (the first 100 items; the whole test with `full`)
 * with the 600 s target at that precision.  Included by bench_scale.c after its
 * helpers (scale_ctx, fwd_batch, scale_forward_rate, scale_eval_child, REPS,
 * SCALE_DIR, ARC_*). */
#ifndef QS_BENCH_SCALE_AMX_H
#define QS_BENCH_SCALE_AMX_H

/* The batches through a second model packed for bf16-amx: tokens/s of the
 * median pass, or -1 (the reason printed). */
static double scale_amx_rate(const fwd_batch *bt, int nb, int rows, double tokens)
{
    llama_model ma;
    qs_diag d = {0};
    if (model_load_packed(&ma, SCALE_DIR, MATMUL_BF16_AMX, &d)) {
        printf("  bf16-amx: %s\n", d.msg);
        return -1;
    }
    double tps = scale_forward_rate(&ma, bt, nb, rows, tokens);
    model_free(&ma);
    if (tps < 0)
        printf("  bf16-amx: the forward failed\n");
    return tps;
}

static void scale_forward_amx(scale_ctx *x, const fwd_batch *bt, int nb, int rows, double tokens)
{
    if (!cpu_amx_bf16()) {
        printf("  bf16-amx: this CPU has no AMX (needs AMX-BF16 and AMX-TILE)\n");
        return;
    }
    x->amx_tps = scale_amx_rate(bt, nb, rows, tokens);
    if (x->amx_tps > 0)
        printf("  bf16-amx (AMX tiles): %.0f tokens/s (median of %d passes) = %.2fx bf16\n",
               x->amx_tps, REPS, x->amx_tps / x->fwd_tps);
}

/* eval children at bf16-amx: ARC-Easy first 100, and the whole test with `full`. */
static void scale_eval_amx(scale_ctx *x)
{
    if (!cpu_amx_bf16())
        return;
    child_run r;
    double l, s;
    loadavg_print("before bf16-amx eval");
    if (!scale_eval_child(x, "arc_easy", "100", "bf16-amx", &r, &l, &s)) {
        x->amx_arc_load_s = l;
        x->amx_arc_score_s = s;
        printf("  arc_easy first %d, bf16-amx: %.1f s wall (load %.1f s, scoring %.1f s), %.2f "
               "items/s, %.0f tokens/s, peak RSS %.2f GB\n", ARC_ITEMS, r.wall_s, l, s,
               ARC_ITEMS / s, x->arc_tokens / s, r.maxrss_kb / 1e6 * 1.024);
    }
    if (x->full && !scale_eval_child(x, "arc_easy", NULL, "bf16-amx", &r, &l, &s)) {
        x->amx_full_arc_s = r.wall_s;
        printf("  arc_easy whole test (%d items), bf16-amx: %.1f s wall (load %.1f s, scoring "
               "%.1f s), %.2f items/s, peak RSS %.2f GB\n", ARC_TEST_ITEMS, r.wall_s, l, s,
               ARC_TEST_ITEMS / s, r.maxrss_kb / 1e6 * 1.024);
    }
    loadavg_print("after");
}

static void scale_amx_arc_target(const scale_ctx *x)
{
    double arc = x->amx_full_arc_s > 0 ? x->amx_full_arc_s
                 : x->amx_arc_score_s > 0
                     ? x->amx_arc_load_s + x->amx_arc_score_s * ARC_TEST_ITEMS / ARC_ITEMS
                     : 0;
    if (arc > 0)
        printf("  ARC-Easy test (%d items) 0-shot at bf16-amx <= %.0f s: %s (%.0f s, %s)\n",
               ARC_TEST_ITEMS, TARGET_ARC_S, arc <= TARGET_ARC_S ? "PASS" : "MISS", arc,
               x->amx_full_arc_s > 0 ? "measured" : "extrapolated from the first 100 items");
}

#endif
