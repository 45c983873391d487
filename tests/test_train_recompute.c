/* test_train_recompute.c: the trainer with recompute = true runs the same bits
 * as with recompute = false on the demo model: HiF8 QAT after a bf16 warmup,
 * grad_accum > 1, pass and masked STE, fp32 and bf16, the spike injector on
 * (weights, AdamW state, amax histories, every quantizer record, losses,
 * events); a run killed and resumed
 * with the other setting continues bit-exactly and its logs (metrics.jsonl
 * without timing, events.jsonl, quant.jsonl.zst with the QSNR) are the straight
 * run's byte for byte; recompute's estimate is smaller and the library's
 * allocations stay within it. */
#include <stdlib.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/qlog.h"
#include "qs/trainer.h"
#include "test.h"
#include "test_token_stream.h"

/* the pair at stream index i: input and target from two parts of one hash */
static void trc_pair(long i, int vocab, int32_t *tok, int32_t *tgt)
{
    unsigned long x = (unsigned long)i * 2654435761ul + 977u;
    *tok = (int32_t)((x >> 7) % (unsigned long)vocab);
    *tgt = (int32_t)((x >> 17) % (unsigned long)vocab);
}

/* QAT from step 2 on a plan mixing hooked and unhooked Linears of one group
 * (layers 2-7 quantized, block 4's attention not), most-recent amax so the
 * weights' growth clips (masked STE has work to do); spike: a spike_rate
 * setting (NULL: off). */
static int trc_cfg(runcfg *c, const char *run, int recompute, const char *prec, const char *ste,
                   const char *spike)
{
    qs_diag d = {0};
    char set[3][64];
    runcfg_defaults(c);
    snprintf(c->model, sizeof c->model, "data/demo/model");
    snprintf(c->train_data, sizeof c->train_data, "(memory)");
    snprintf(c->out_dir, sizeof c->out_dir, "%s/trc_%s", test_tmp_dir(), run);
    snprintf(set[0], sizeof set[0], "recompute=%s", recompute ? "true" : "false");
    snprintf(set[1], sizeof set[1], "precision=%s", prec);
    snprintf(set[2], sizeof set[2], "ste=%s", ste);
    const char *const sets[] = {"batch_size=2", "seq_len=16", "grad_accum=3", "steps=7",
                                "lr=3e-3", "lr_warmup_steps=2", "bf16_warmup_steps=2",
                                "amax_estimator=most-recent",
                                "quant_modules=layers.2-7.*,!layers.4.self_attn.*",
                                "spike_scale=64", spike ? spike : "spike_rate=0",
                                set[0], set[1], set[2]};
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++)
        if (runcfg_set(c, sets[i], &d)) {
            fprintf(stderr, "    %s: %s\n", sets[i], d.msg);
            return -1;
        }
    return 0;
}

/* metrics.jsonl without the timing fields (tok_per_s onwards but max_clip_rate) */
static char *trc_metrics(const char *run_dir)
{
    char path[700], *text;
    size_t n;
    qs_diag d = {0};
    snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
    if (fileio_read_all(path, &text, &n, &d))
        return NULL;
    char *w = text;
    for (char *r = text; *r;) {
        char *cut = strstr(r, ",\"tok_per_s\":"), *nl = strchr(r, '\n');
        if (!nl)
            nl = r + strlen(r);
        char *clip = cut && cut < nl ? strstr(cut, ",\"max_clip_rate\":") : NULL;
        char *end = clip && clip < nl ? strstr(clip + 1, ",\"elapsed_s\":") : NULL;
        size_t keep = (size_t)((cut && cut < nl ? cut : nl) - r);
        memmove(w, r, keep);
        w += keep;
        if (end && end < nl) {
            memmove(w, clip, (size_t)(end - clip));
            w += end - clip;
        }
        *w++ = '\n';
        r = *nl ? nl + 1 : nl;
    }
    *w = 0;
    return text;
}

static int trc_same_file(const char *a_dir, const char *b_dir, const char *rel)
{
    char pa[700], pb[700], *ta, *tb;
    size_t na, nb;
    qs_diag d = {0};
    snprintf(pa, sizeof pa, "%s/%s", a_dir, rel);
    snprintf(pb, sizeof pb, "%s/%s", b_dir, rel);
    if (fileio_read_all(pa, &ta, &na, &d))
        return 0;
    if (fileio_read_all(pb, &tb, &nb, &d)) {
        qs_free(ta);
        return 0;
    }
    int same = na == nb && memcmp(ta, tb, na) == 0;
    qs_free(ta);
    qs_free(tb);
    return same;
}

/* the same metrics (but timing), final checkpoint and quantizer records, QSNR included */
static void trc_same_runs(const runcfg *a, const runcfg *b)
{
    char *ma = trc_metrics(a->out_dir), *mb = trc_metrics(b->out_dir);
    ASSERT_TRUE(ma && mb);
    ASSERT_TRUE(strstr(ma, "\"phase\":\"qat\"") != NULL);
    ASSERT_EQ_STR(ma, mb);
    qs_free(ma);
    qs_free(mb);
    ASSERT_TRUE(trc_same_file(a->out_dir, b->out_dir, "ckpt/step_7/model.safetensors"));
    ASSERT_TRUE(trc_same_file(a->out_dir, b->out_dir, "ckpt/step_7/train_state.bin"));
    char pa[700], pb[700];
    qs_diag d = {0};
    qlog_run ra = {0}, rb = {0};
    snprintf(pa, sizeof pa, "%s/%s", a->out_dir, QLOG_FILE);
    snprintf(pb, sizeof pb, "%s/%s", b->out_dir, QLOG_FILE);
    ASSERT_OK(qlog_read(pa, &ra, &d), &d);
    ASSERT_OK(qlog_read(pb, &rb, &d), &d);
    ASSERT_TRUE(ra.n_quant == rb.n_quant && ra.n_steps == rb.n_steps && ra.n_steps == 7);
    ASSERT_EQ_INT(ra.n_quant, 2 * (6 * 7 - 4));
    ASSERT_TRUE(memcmp(ra.rows, rb.rows, (size_t)ra.n_steps * ra.n_quant * sizeof *ra.rows) == 0);
    qlog_run_free(&ra);
    qlog_run_free(&rb);
}

static int trc_train(const runcfg *c)
{
    test_stream dm = {0, 512, trc_pair};
    train_data src = test_stream_data(&dm);
    trainer_options opt = {0};
    trainer *t;
    qs_diag d = {0};
    if (trainer_create(&t, c, &src, &opt, &d)) {
        fprintf(stderr, "    create: %s\n", d.msg);
        return -1;
    }
    int rc = test_train_steps(t, c->steps);
    if (trainer_finish(t, "done", &d))
        rc = -1;
    return rc;
}

static void trc_compare(const char *prec, const char *ste, const char *spike)
{
    runcfg keep, rec;
    char na[64], nb[64];
    snprintf(na, sizeof na, "keep_%s_%s%s", prec, ste, spike ? "_spike" : "");
    snprintf(nb, sizeof nb, "rec_%s_%s%s", prec, ste, spike ? "_spike" : "");
    ASSERT_EQ_INT(trc_cfg(&keep, na, 0, prec, ste, spike), 0);
    ASSERT_EQ_INT(trc_cfg(&rec, nb, 1, prec, ste, spike), 0);
    ASSERT_EQ_INT(trc_train(&keep), 0);
    ASSERT_EQ_INT(trc_train(&rec), 0);
    trc_same_runs(&keep, &rec);
}

TEST(train_recompute, fp32_qat_run_is_the_same_bits_with_recompute)
{
    trc_compare("fp32", "pass", NULL);
}

TEST(train_recompute, bf16_qat_run_is_the_same_bits_with_recompute)
{
    trc_compare("bf16", "pass", NULL);
}

TEST(train_recompute, masked_ste_run_is_the_same_bits_with_recompute)
{
    trc_compare("bf16", "masked", NULL);
}

/* spiked rows are injected again when a recomputed block replays its quantizers */
TEST(train_recompute, spike_injected_run_is_the_same_bits_with_recompute)
{
    trc_compare("bf16", "pass", "spike_rate=0.25");
    char keep[700], rec[700], *events;
    size_t n;
    qs_diag d = {0};
    snprintf(keep, sizeof keep, "%s/trc_keep_bf16_pass_spike", test_tmp_dir());
    snprintf(rec, sizeof rec, "%s/trc_rec_bf16_pass_spike", test_tmp_dir());
    ASSERT_TRUE(trc_same_file(keep, rec, "events.jsonl"));
    snprintf(keep + strlen(keep), sizeof keep - strlen(keep), "/events.jsonl");
    ASSERT_OK(fileio_read_all(keep, &events, &n, &d), &d);
    ASSERT_TRUE(strstr(events, "\"type\":\"spike\"") != NULL);
    qs_free(events);
}

/* a run killed after its step-4 checkpoint, resumed with the other setting */
static void trc_resume_toggled(int first)
{
    runcfg straight, b;
    char na[64], nb[64];
    snprintf(na, sizeof na, "straight_%d", first);
    snprintf(nb, sizeof nb, "toggled_%d", first);
    ASSERT_EQ_INT(trc_cfg(&straight, na, !first, "bf16", "pass", NULL), 0);
    ASSERT_EQ_INT(trc_cfg(&b, nb, first, "bf16", "pass", NULL), 0);
    qs_diag d = {0};
    ASSERT_OK(runcfg_set(&b, "ckpt_every=4", &d), &d);
    ASSERT_OK(runcfg_set(&straight, "run_name=cmp", &d), &d);   /* quant.jsonl's header names it */
    ASSERT_OK(runcfg_set(&b, "run_name=cmp", &d), &d);
    ASSERT_EQ_INT(trc_train(&straight), 0);
    test_stream dm = {0, 512, trc_pair};
    train_data src = test_stream_data(&dm);
    trainer_options opt = {0};
    trainer *t;
    ASSERT_OK(trainer_create(&t, &b, &src, &opt, &d), &d);
    ASSERT_EQ_INT(test_train_steps(t, 5), 0);
    trainer_destroy(t);   /* killed: step 4 is lost */
    b.recompute = !first;
    opt.resume_dir = b.out_dir;
    ASSERT_OK(trainer_create(&t, &b, &src, &opt, &d), &d);
    ASSERT_EQ_INT(trainer_next_step(t), 4);
    ASSERT_EQ_INT(test_train_steps(t, 10), 0);
    ASSERT_OK(trainer_finish(t, "done", &d), &d);
    trc_same_runs(&straight, &b);   /* train_state.bin v2 restores the QSNR cursors */
    ASSERT_TRUE(trc_same_file(straight.out_dir, b.out_dir, "events.jsonl"));
    ASSERT_TRUE(trc_same_file(straight.out_dir, b.out_dir, QLOG_FILE));   /* decompressed */
}

TEST(train_recompute, resume_turning_recompute_on_or_off_is_bit_exact)
{
    trc_resume_toggled(0);
    trc_resume_toggled(1);
}

TEST(train_recompute, estimate_is_smaller_and_within_ten_percent_of_the_peak)
{
    size_t keep_total[2] = {0, 0};
    for (int r = 0; r < 2; r++)
        for (int warm = 0; warm < 2; warm++) {   /* QAT from step 0, or after a bf16 step */
            runcfg c;
            char name[32], set[40];
            snprintf(name, sizeof name, "mem_%d_%d", r, warm);
            ASSERT_EQ_INT(trc_cfg(&c, name, r, "bf16", "pass", NULL), 0);
            qs_diag d = {0};
            snprintf(set, sizeof set, "bf16_warmup_steps=%d", warm);
            ASSERT_OK(runcfg_set(&c, "seq_len=128", &d), &d);
            ASSERT_OK(runcfg_set(&c, set, &d), &d);
            train_memory m;
            ASSERT_OK(trainer_memory_estimate(&c, &m, &d), &d);
            /* packs of the quantized weights: during a warmup, never with recompute */
            ASSERT_TRUE(warm && !r ? m.warmup_pack_bytes > 0 : m.warmup_pack_bytes == 0);
            test_stream dm = {0, 512, trc_pair};
            train_data src = test_stream_data(&dm);
            trainer_options opt = {0};
            trainer *t;
            qs_mem_reset_peak();
            size_t live0 = qs_mem_live_bytes();
            ASSERT_OK(trainer_create(&t, &c, &src, &opt, &d), &d);
            ASSERT_EQ_INT(test_train_steps(t, 3), 0);
            double ratio = (double)(qs_mem_peak_bytes() - live0) / (double)m.total_bytes;
            trainer_destroy(t);
            if (!(ratio >= 0.9 && ratio <= 1.1))   /* the criterion: within 10% */
                TEST_FAIL_AT("recompute %d warmup %d: peak %.3f of the estimate", r, warm, ratio);
            if (r == 0)
                keep_total[warm] = m.total_bytes;
            else
                ASSERT_TRUE(m.total_bytes < keep_total[warm] / 2);
        }
}
