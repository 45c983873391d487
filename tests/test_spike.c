/* test_spike.c: the spike injector (include/qs/spike.h) and the saturation
 * detector validated on it: every injected spike reaches quant.jsonl.zst, every
 * spike that clips above the alarm threshold raises an alarm (recall 100%),
 * every alarm is a spike, and without injection (ample margin) no alarm fires. */
#include <jansson.h>
#include <stdlib.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/qlog.h"
#include "qs/spike.h"
#include "qs/trainer.h"
#include "test.h"
#include "test_token_stream.h"

TEST(spike, pick_is_seeded_and_hits_the_rate)
{
    spike_plan p = {42, 0.1, 64.0f};
    long hits = 0, n = 20000;
    for (long s = 0; s < n / 20; s++)
        for (int l = 0; l < 20; l++) {
            int row = -1, row2 = -1;
            int a = spike_pick(&p, s, l, 37, &row), b = spike_pick(&p, s, l, 37, &row2);
            ASSERT_EQ_INT(a, b);
            if (a) {
                ASSERT_EQ_INT(row, row2);
                ASSERT_TRUE(row >= 0 && row < 37);
            }
            hits += a;
        }
    /* binomial(20000, 0.1): sd 42 */
    ASSERT_TRUE(hits > 2000 - 200 && hits < 2000 + 200);
    spike_plan other = {43, 0.1, 64.0f};
    int same = 0, row;
    for (long s = 0; s < 200; s++)
        same += spike_pick(&p, s, 3, 37, &row) == spike_pick(&other, s, 3, 37, &row);
    ASSERT_TRUE(same < 200);   /* another seed, other steps */
    spike_plan off = {42, 0.0, 64.0f};
    ASSERT_EQ_INT(spike_pick(&off, 5, 1, 37, &row), 0);
}

TEST(spike, row_mul_and_div_touch_only_the_row)
{
    float x[12] = {1, -2, 3, 4, 5, -6, 7, 8, 9, 10, 11, 12}, x0[12];
    memcpy(x0, x, sizeof x);
    float amax = spike_row_mul(x, 1, 4, 64.0f);   /* row 1 = 5, -6, 7, 8 */
    ASSERT_NEAR(amax, 512.0, 0);
    ASSERT_NEAR(x[5], -384.0, 0);
    ASSERT_NEAR(x[3], 4.0, 0);
    ASSERT_NEAR(x[8], 9.0, 0);
    spike_row_div(x, 1, 4, 64.0f);
    ASSERT_TRUE(!memcmp(x, x0, sizeof x));   /* a power-of-two factor is undone exactly */
}

/* ---- the detector on a real (tiny) training run ---- */

static void mem_pair(long i, int vocab, int32_t *tok, int32_t *tgt)
{
    (void)vocab;
    *tok = (int32_t)(3 + (i * 7 + (i / 5) % 11) % 200);
    *tgt = (int32_t)(3 + ((i + 1) * 7 + ((i + 1) / 5) % 11) % 200);
}

/* most-recent, margin 3 (8x headroom), 24 steps (4 warmup) of the demo model */
static int spike_run(const char *name, double rate, runcfg *c, qs_diag *d)
{
    runcfg_defaults(c);
    snprintf(c->model, sizeof c->model, "data/demo/model");
    snprintf(c->train_data, sizeof c->train_data, "(memory)");
    snprintf(c->out_dir, sizeof c->out_dir, "%s/spike_%s", test_tmp_dir(), name);
    snprintf(c->amax_estimator, sizeof c->amax_estimator, "most-recent");
    c->batch_size = 2;
    c->seq_len = 16;
    c->steps = 24;
    c->bf16_warmup_steps = 4;
    c->lr = 1e-3;
    c->amax_margin = 3;
    c->spike_rate = rate;
    c->spike_scale = 512;
    test_stream src = {0, 0, mem_pair};
    return test_stream_train(c, &src, d);
}

typedef struct ev {
    long step;
    char type[16], tensor[QUANT_NAME_MAX];
    double amax;
} ev;

static int events_load(const char *run_dir, ev *out, int max, int *n)
{
    char path[700], *text;
    size_t bytes;
    snprintf(path, sizeof path, "%s/events.jsonl", run_dir);
    if (fileio_read_all(path, &text, &bytes, NULL))
        return -1;
    *n = 0;
    for (char *s = text, *e; *s; s = e + 1) {
        e = strchr(s, '\n');
        if (!e)
            break;
        json_t *o = json_loadb(s, (size_t)(e - s), 0, NULL);
        const char *type = json_string_value(json_object_get(o, "type"));
        const char *tensor = json_string_value(json_object_get(o, "tensor"));
        if (type && tensor && *n < max) {
            ev *v = &out[(*n)++];
            v->step = (long)json_integer_value(json_object_get(o, "step"));
            snprintf(v->type, sizeof v->type, "%s", type);
            snprintf(v->tensor, sizeof v->tensor, "%s", tensor);
            v->amax = json_number_value(json_object_get(o, "amax"));
        }
        json_decref(o);
    }
    qs_free(text);
    return 0;
}

static int qlog_index(const qlog_run *q, const char *name, long step, int *qi, int *si)
{
    *qi = *si = -1;
    for (int i = 0; i < q->n_quant; i++)
        if (!strcmp(q->names[i], name))
            *qi = i;
    for (int i = 0; i < q->n_steps; i++)
        if (q->steps[i] == step)
            *si = i;
    return *qi >= 0 && *si >= 0;
}

static int has_event(const ev *evs, int n, const char *type, long step, const char *tensor)
{
    for (int i = 0; i < n; i++)
        if (evs[i].step == step && !strcmp(evs[i].type, type) && !strcmp(evs[i].tensor, tensor))
            return 1;
    return 0;
}

TEST(spike, detector_recalls_every_clipping_spike_and_nothing_else)
{
    runcfg c;
    qs_diag d = {0};
    ASSERT_OK(spike_run("on", 0.15, &c, &d), &d);
    static ev evs[4096];
    int n_ev;
    ASSERT_EQ_INT(events_load(c.out_dir, evs, 4096, &n_ev), 0);
    qlog_run q = {0};
    char path[700];
    snprintf(path, sizeof path, "%s/quant.jsonl.zst", c.out_dir);
    ASSERT_OK(qlog_read(path, &q, &d), &d);
    int spikes = 0, clipping = 0, above = 0, alarmed = 0;
    for (int i = 0; i < n_ev; i++) {
        if (strcmp(evs[i].type, "spike"))
            continue;
        int qi, si;
        spikes++;
        ASSERT_TRUE(qlog_index(&q, evs[i].tensor, evs[i].step, &qi, &si));
        const qlog_row *r = qlog_run_row(&q, si, qi);
        ASSERT_TRUE(r->amax >= (float)evs[i].amax * (1 - 1e-6f));   /* the log saw the spike */
        if (evs[i].step < c.bf16_warmup_steps)
            continue;                                                /* observe: no alarms */
        if (r->amax > r->pred_amax * 8.0f) {                         /* beyond the 8x margin */
            clipping++;
            ASSERT_TRUE(r->clip > 0);
        }
        if (r->clip_rate > c.saturation_clip_rate) {
            above++;
            int continuing = si > 0 && qlog_run_row(&q, si - 1, qi)->clip_rate > c.saturation_clip_rate;
            alarmed += has_event(evs, n_ev, "saturation", evs[i].step, evs[i].tensor) || continuing;
        }
    }
    ASSERT_TRUE(spikes > 10);
    ASSERT_TRUE(above > 5);              /* the test is not vacuous */
    ASSERT_EQ_INT(alarmed, above);       /* recall 100% */
    ASSERT_TRUE(clipping >= above);
    for (int i = 0; i < n_ev; i++)       /* precision: every alarm is a spike */
        if (!strcmp(evs[i].type, "saturation"))
            ASSERT_TRUE(has_event(evs, n_ev, "spike", evs[i].step, evs[i].tensor));
    qlog_run_free(&q);
}

TEST(spike, no_injection_and_ample_margin_raise_no_alarm)
{
    runcfg c;
    qs_diag d = {0};
    ASSERT_OK(spike_run("off", 0.0, &c, &d), &d);
    static ev evs[4096];
    int n_ev;
    ASSERT_EQ_INT(events_load(c.out_dir, evs, 4096, &n_ev), 0);
    for (int i = 0; i < n_ev; i++)
        ASSERT_TRUE(strcmp(evs[i].type, "saturation") && strcmp(evs[i].type, "spike"));
    qlog_run q = {0};
    char path[700];
    snprintf(path, sizeof path, "%s/quant.jsonl.zst", c.out_dir);
    ASSERT_OK(qlog_read(path, &q, &d), &d);
    ASSERT_EQ_INT(q.n_steps, 24);
    qlog_run_free(&q);
}

TEST(spike, config_refuses_spikes_without_qat_or_with_masked_ste)
{
    runcfg c;
    qs_diag d = {0};
    runcfg_defaults(&c);
    snprintf(c.model, sizeof c.model, "m");
    snprintf(c.train_data, sizeof c.train_data, "t");
    snprintf(c.out_dir, sizeof c.out_dir, "o");
    ASSERT_OK(runcfg_set(&c, "spike_rate=0.1", &d), &d);
    ASSERT_OK(runcfg_validate(&c, &d), &d);
    ASSERT_OK(runcfg_set(&c, "qat=false", &d), &d);
    ASSERT_EQ_INT(runcfg_validate(&c, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "spike_rate") != NULL);
    ASSERT_OK(runcfg_set(&c, "qat=true", &d), &d);
    ASSERT_OK(runcfg_set(&c, "ste=masked", &d), &d);
    ASSERT_EQ_INT(runcfg_validate(&c, &d), QS_EINVAL);
}
