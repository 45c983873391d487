/* trainer_quant.c: the trainer's side of the quantization seam.
 *
 * Forward hook (model_linear_hook), per planned Linear:
 *   bf16 warmup: quant_observe(input), quant_observe(weight); the matmul uses
 *                the unquantized operands (histories fill up);
 *   QAT:         quant_quantize(input -> slot.xq); the weight is quantized into
 *                slot.wq once per optimizer step (weights change only at the
 *                step): the first micro-batch runs quant_quantize, later ones
 *                quant_quantize_repeat, which records exactly what a fresh
 *                quantize would (the detector's records do not change) but only
 *                touches the QSNR sample; the matmul uses copies of both in the
 *                model's scratch (model_forward.c's hook protocol).
 * Backward hook (model_linear_bwd_hook): slot.xq and slot.wq feed the backward
 * matmuls ("the backward uses the operands the forward used"), the weight through
 * a persistent pack of slot.wq (refreshed when it is re-quantized, so one pack
 * serves every micro-batch's backward); the STE passes gradients through
 * unchanged, or (ste = masked) zeroes them where the forward clipped, judged on
 * the unquantized operand with the forward's scale.
 * Spike injector (spike_rate > 0, include/qs/spike.h): on a picked (step,
 * Linear) the quantizer gets a copy of the input with one token row multiplied
 * by spike_scale (observe or quantize), and the quantized row is divided back.
 */
#include <stdio.h>
#include <string.h>

#include "qs/json.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "trainer_impl.h"

static void trainer_linear_shape(const llama_config *c, int module, int *IN, int *O)
{
    int C = c->dim, F = c->hidden_dim, QD = c->n_heads * c->head_dim;
    int KD = c->n_kv_heads * c->head_dim;
    static const char in_kind[MODEL_LIN_COUNT] = {'C', 'C', 'C', 'Q', 'C', 'C', 'F'};
    static const char out_kind[MODEL_LIN_COUNT] = {'Q', 'K', 'K', 'C', 'F', 'F', 'C'};
    int dims[4] = {C, F, QD, KD};
    const char *kinds = "CFQK";
    *IN = dims[strchr(kinds, in_kind[module]) - kinds];
    *O = dims[strchr(kinds, out_kind[module]) - kinds];
}

static const float *trainer_master_weight(const llama_model *m, int layer, int module)
{
    const llama_layer_weights *lw = &m->w.layer[layer];
    const float *const w[MODEL_LIN_COUNT] = {lw->wq, lw->wk, lw->wv, lw->wo,
                                             lw->w_gate, lw->w_up, lw->w_down};
    return w[module];
}

static int trainer_plan_build(qplan *p, const llama_config *c, const runcfg *cfg, qs_diag *d)
{
    int rc = qplan_init(p, c->n_layers);
    if (rc)
        return diag_set(d, rc, NULL, -1, "out of memory");
    if (!cfg->qat)
        return 0;
    char buf[RUNCFG_STR_MAX];
    memcpy(buf, cfg->quant_modules, sizeof buf);
    for (char *save, *pat = strtok_r(buf, ",", &save); pat; pat = strtok_r(NULL, ",", &save))
        if ((rc = qplan_apply(p, pat, d))) {
            qplan_free(p);
            return rc;
        }
    if (qplan_count(p) == 0) {   /* qat on but nothing to quantize: a run that never quantizes */
        qplan_free(p);
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "quant_modules '%s' selects no Linear of this %d-block model (the "
                        "default skips the first 3 and last 2 blocks); choose blocks, e.g. "
                        "--set 'quant_modules=layers.*.mlp.*', or set qat=false for an "
                        "unquantized run",
                        cfg->quant_modules, c->n_layers);
    }
    return 0;
}

int trainer_recipe_from_cfg(const runcfg *cfg, quant_recipe *r, qs_diag *d)
{
    quant_recipe_default(r);
    char msg[QS_DIAG_MSG_MAX];
    int rc = amax_estimator_parse(cfg->amax_estimator, &r->est, d);
    if (rc) {   /* the parser's message, with the config key it came from */
        snprintf(msg, sizeof msg, "%s", d->msg);
        return diag_set(d, rc, NULL, -1, "amax_estimator: %s", msg);
    }
    r->margin = (int)cfg->amax_margin;
    r->history_steps = (int)cfg->amax_history;
    if ((rc = quant_recipe_check(r, d))) {
        snprintf(msg, sizeof msg, "%s", d->msg);
        return diag_set(d, rc, NULL, -1, "amax_estimator '%s', amax_history %ld, amax_margin %ld: %s",
                        cfg->amax_estimator, cfg->amax_history, cfg->amax_margin, msg);
    }
    return 0;
}

size_t trainer_quant_bytes(const llama_config *c, const runcfg *cfg, int precision, int *n_slots,
                           size_t *master_pack_bytes, qs_diag *d)
{
    qplan p;
    *n_slots = 0;
    *master_pack_bytes = 0;
    if (trainer_plan_build(&p, c, cfg, d))
        return 0;
    size_t N = (size_t)cfg->batch_size * cfg->seq_len, total = 0, spike_bytes = 0;
    int kind_used[MODEL_LIN_COUNT] = {0};
    for (int l = 0; l < c->n_layers; l++)
        for (int k = 0; k < MODEL_LIN_COUNT; k++)
            if (qplan_is_on(&p, l, k)) {
                int IN, O;
                trainer_linear_shape(c, k, &IN, &O);
                if (!cfg->recompute || !kind_used[k])   /* recompute: one pair per kind */
                    total += (N * IN + (size_t)O * IN) * sizeof(float);
                kind_used[k] = 1;
                /* the pack of wq: only its dx form is built (the forward packs
                 * its copy on the fly), about half of both forms; none with
                 * recompute (the backward packs wq on the fly) */
                if (!cfg->recompute)
                    total += matmul_wpack_bytes_estimate(IN, O, precision) / 2;
                total += 2 * (size_t)cfg->amax_history * sizeof(float);
                *master_pack_bytes += matmul_wpack_bytes_estimate(IN, O, precision);
                if (cfg->spike_rate > 0 && N * IN * sizeof(float) > spike_bytes)
                    spike_bytes = N * IN * sizeof(float);
                (*n_slots)++;
            }
    qplan_free(&p);
    return total + spike_bytes;
}

static int trainer_hook_planned(void *self, int layer, int module)
{
    const struct trainer *t = self;
    return t->slot_of[layer * MODEL_LIN_COUNT + module] >= 0;
}

static int trainer_fwd_hook(void *self, int layer, int module, const float *x, float *xq, int N,
                            int IN, const float *w, float *wq, int O)
{
    struct trainer *t = self;
    int s = t->slot_of[layer * MODEL_LIN_COUNT + module];
    if (s < 0)
        return 0;
    trainer_qslot *sl = &t->slots[s];
    quant *qi = quant_set_get(t->qset, sl->q_input), *qw = quant_set_get(t->qset, sl->q_weight);
    size_t nx = (size_t)N * IN, nw = (size_t)O * IN;
    qs_diag d = {0};
    t->sub_slot = -1;
    if (t->frozen) {   /* in-loop evaluation: current scales, nothing recorded */
        if (quant_apply(qi, x, xq, nx, &d) || quant_apply(qw, w, wq, nw, &d))
            return QS_ENAN;
        return 1;
    }
    sl->x = x;
    sl->w = w;
    const float *xin = x;   /* what the input quantizer sees */
    int row = -1;
    if (t->spike_x && spike_pick(&t->spike, t->step, layer * MODEL_LIN_COUNT + module, N, &row)) {
        memcpy(t->spike_x, x, nx * sizeof *x);
        float amax = spike_row_mul(t->spike_x, row, IN, t->spike.scale);
        if (sl->spike_step != t->step || amax > sl->spike_amax)
            sl->spike_amax = amax;
        sl->spike_step = t->step;
        sl->spike_row = row;
        xin = t->spike_x;
    }
    if (t->phase != SCHEDULE_PHASE_QAT) {
        sl->quantized = 0;
        if (quant_observe(qi, xin, nx, &d) || quant_observe(qw, w, nw, &d))
            return QS_ENAN;
        return 0;
    }
    if (quant_quantize(qi, xin, sl->xq, nx, &d))
        return QS_ENAN;
    if (row >= 0)
        spike_row_div(sl->xq, row, IN, t->spike.scale);
    /* a later micro-batch: same weight, same scale (with recompute only while the
     * module's shared buffer still holds this slot's wq) */
    if (sl->w_step == t->step && (!t->cfg.recompute || t->mod_owner[module] == s)) {
        if (quant_quantize_repeat(qw, w, sl->wq, nw, &d))
            return QS_ENAN;
    } else {
        sl->w_step = -1;
        if (quant_quantize(qw, w, sl->wq, nw, &d))
            return QS_ENAN;
        sl->w_step = t->step;
        matmul_wpack_refresh(sl->wpack);
    }
    sl->x_scale = quant_last_scale(qi);
    sl->w_scale = quant_last_scale(qw);
    if (t->cfg.recompute)
        t->mod_owner[module] = s;
    (void)xq;   /* the matmul reads the slot's operands (trainer_hook_where) */
    (void)wq;
    t->sub_slot = s;
    sl->quantized = 1;
    return 1;
}

/* Recompute: slot s's operands back into its module's buffers, fake-quantized
 * at the scales of the forward (x[N, IN]: the recomputed input, same values);
 * a spike the forward injected is injected again (spike_pick is a pure
 * function of the step and the Linear), its amax not recorded again. */
static void trainer_slot_replay(struct trainer *t, int s, int layer, int module, const float *x,
                                int N, int IN, int O)
{
    trainer_qslot *sl = &t->slots[s];
    size_t nx = (size_t)N * IN, nw = (size_t)O * IN;
    const float *xin = x;
    int row = -1;
    if (t->spike_x && spike_pick(&t->spike, t->step, layer * MODEL_LIN_COUNT + module, N, &row)) {
        memcpy(t->spike_x, x, nx * sizeof *x);
        (void)spike_row_mul(t->spike_x, row, IN, t->spike.scale);
        xin = t->spike_x;
    }
    quant_replay(quant_set_get(t->qset, sl->q_input), xin, sl->xq, nx, sl->x_scale);
    if (row >= 0)
        spike_row_div(sl->xq, row, IN, t->spike.scale);
    quant_replay(quant_set_get(t->qset, sl->q_weight), sl->w, sl->wq, nw, sl->w_scale);
    sl->x = x;
    t->mod_owner[module] = s;
}

/* model_linear_hook.replay: a block recomputed for its backward gets the
 * substitution its forward made, and nothing is recorded again. */
static int trainer_replay_hook(void *self, int layer, int module, const float *x, float *xq,
                               int N, int IN, const float *w, float *wq, int O)
{
    struct trainer *t = self;
    int s = t->slot_of[layer * MODEL_LIN_COUNT + module];
    if (s < 0 || !t->slots[s].quantized)   /* the forward used x and w as they are */
        return 0;
    (void)w;
    (void)xq;
    (void)wq;
    trainer_slot_replay(t, s, layer, module, x, N, IN, O);
    t->sub_slot = s;
    return 1;
}

/* model_linear_hook.where: the operands of the call that just returned 1 are
 * the slot's own (the backward reads them too), except an in-loop evaluation's,
 * written to the model's buffers. */
static void trainer_hook_where(void *self, const float **xq, const float **wq)
{
    struct trainer *t = self;
    if (t->sub_slot < 0)
        return;
    *xq = t->slots[t->sub_slot].xq;
    *wq = t->slots[t->sub_slot].wq;
    t->sub_slot = -1;
}

static int trainer_bwd_operands(void *self, int layer, int module, const float **x_used,
                                const float **w_used, struct matmul_wpack **w_pack)
{
    struct trainer *t = self;
    int s = t->slot_of[layer * MODEL_LIN_COUNT + module];
    if (s < 0 || !t->slots[s].quantized)
        return 0;
    if (t->cfg.recompute && t->mod_owner[module] != s) {   /* not replayed by the block */
        int IN, O;
        trainer_linear_shape(&t->m.cfg, module, &IN, &O);
        trainer_slot_replay(t, s, layer, module, t->slots[s].x,
                            (int)(t->cfg.batch_size * t->cfg.seq_len), IN, O);
    }
    *x_used = t->slots[s].xq;
    *w_used = t->slots[s].wq;
    *w_pack = t->slots[s].wpack;
    return t->ste == QUANT_STE_MASKED;
}

static void trainer_bwd_mask(void *self, int layer, int module, float *dx, size_t n_x, float *dw,
                             size_t n_w)
{
    struct trainer *t = self;
    trainer_qslot *sl = &t->slots[t->slot_of[layer * MODEL_LIN_COUNT + module]];
    quant_ste_backward(QUANT_STE_MASKED, sl->x, quant_last_scale(quant_set_get(t->qset, sl->q_input)),
                       dx, n_x);
    quant_ste_backward(QUANT_STE_MASKED, sl->w, quant_last_scale(quant_set_get(t->qset, sl->q_weight)),
                       dw, n_w);
}

const model_linear_bwd_hook trainer_bwd_hook_proto = {NULL, trainer_bwd_operands, trainer_bwd_mask};

int trainer_quant_init(struct trainer *t, qs_diag *d)
{
    const llama_config *c = &t->m.cfg;
    int rc = trainer_plan_build(&t->plan, c, &t->cfg, d);
    if (rc)
        return rc;
    t->slot_of = qs_malloc((size_t)c->n_layers * MODEL_LIN_COUNT * sizeof *t->slot_of);
    if (!t->slot_of)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    for (int i = 0; i < c->n_layers * MODEL_LIN_COUNT; i++)
        t->slot_of[i] = -1;
    int n = qplan_count(&t->plan);
    if (!n)
        return 0;
    if ((rc = quant_ste_parse(t->cfg.ste, &t->ste, d)))
        return rc;
    quant_recipe r;
    if ((rc = trainer_recipe_from_cfg(&t->cfg, &r, d)))
        return rc;
    char (*names)[QUANT_NAME_MAX] = qs_calloc((size_t)n * 2, sizeof *names);
    const char **ptrs = qs_calloc((size_t)n * 2, sizeof *ptrs);
    t->slots = qs_calloc((size_t)n, sizeof *t->slots);
    if (!names || !ptrs || !t->slots) {
        qs_free(names);
        qs_free(ptrs);
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    }
    size_t N = (size_t)t->cfg.batch_size * t->cfg.seq_len, spike_elems = 0;
    for (int k = 0; k < MODEL_LIN_COUNT; k++)
        t->mod_owner[k] = -1;
    for (int l = 0; l < c->n_layers; l++)
        for (int k = 0; k < MODEL_LIN_COUNT; k++) {
            if (!qplan_is_on(&t->plan, l, k))
                continue;
            int s = t->n_slots++, IN, O;
            trainer_qslot *sl = &t->slots[s];
            char mod[96];
            qplan_module_name(mod, sizeof mod, l, k);
            snprintf(names[2 * s], QUANT_NAME_MAX, "%s.input", mod);
            snprintf(names[2 * s + 1], QUANT_NAME_MAX, "%s.weight", mod);
            ptrs[2 * s] = names[2 * s];
            ptrs[2 * s + 1] = names[2 * s + 1];
            sl->q_input = 2 * s;
            sl->q_weight = 2 * s + 1;
            sl->w_step = -1;
            sl->spike_step = -1;
            sl->w = trainer_master_weight(&t->m, l, k);
            trainer_linear_shape(c, k, &IN, &O);
            if (t->cfg.spike_rate > 0 && N * IN > spike_elems)
                spike_elems = N * IN;
            t->slot_of[l * MODEL_LIN_COUNT + k] = s;
        }
    if (!rc && spike_elems) {
        t->spike = (spike_plan){(uint64_t)t->cfg.seed, t->cfg.spike_rate, (float)t->cfg.spike_scale};
        if (!(t->spike_x = qs_malloc(spike_elems * sizeof *t->spike_x)))
            rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory for the spike injector");
    }
    if (!rc)
        rc = quant_set_create(&t->qset, &r, ptrs, 2 * n, d);
    qs_free(names);
    qs_free(ptrs);
    if (rc)
        return rc;
    t->m.hook.self = t;
    t->m.hook.fn = trainer_fwd_hook;
    t->m.hook.planned = trainer_hook_planned;
    t->m.hook.replay = trainer_replay_hook;
    t->m.hook.where = trainer_hook_where;
    t->sub_slot = -1;
    return 0;
}

int trainer_quant_operands(struct trainer *t, qs_diag *d)
{
    if (!t->n_slots || t->slots[0].xq)
        return 0;
    const llama_config *c = &t->m.cfg;
    size_t N = (size_t)t->cfg.batch_size * t->cfg.seq_len;
    const int shared = t->cfg.recompute != 0;
    /* first the warmup's packs of the quantized Linears' master weights: QAT substitutes
     * those weights, so the packs are replaced by empty ones (matmul_wpack builds its
     * forms on first use, which never comes) and their memory goes; then the buffers */
    for (int i = 0; t->m.packs && i < c->n_layers * MODEL_LIN_COUNT; i++) {
        int s = t->slot_of[i], IN, O;
        if (s < 0 || !t->m.packs[i])
            continue;
        trainer_linear_shape(c, i % MODEL_LIN_COUNT, &IN, &O);
        matmul_wpack_destroy(t->m.packs[i]);
        t->m.packs[i] = matmul_wpack_create(t->slots[s].w, IN, O, t->m.packs_precision);
        if (!t->m.packs[i])
            return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    }
    for (int l = 0; l < c->n_layers; l++)
        for (int k = 0; k < MODEL_LIN_COUNT; k++) {
            int s = t->slot_of[l * MODEL_LIN_COUNT + k], IN, O;
            if (s < 0)
                continue;
            trainer_qslot *sl = &t->slots[s];
            trainer_linear_shape(c, k, &IN, &O);
            if (shared && !t->mod_xq[k]) {
                t->mod_xq[k] = qs_malloc(N * IN * sizeof(float));
                t->mod_wq[k] = qs_malloc((size_t)O * IN * sizeof(float));
            }
            sl->xq = shared ? t->mod_xq[k] : qs_malloc(N * IN * sizeof(float));
            sl->wq = shared ? t->mod_wq[k] : qs_malloc((size_t)O * IN * sizeof(float));
            if (sl->wq && !shared)
                sl->wpack = matmul_wpack_create(sl->wq, IN, O, t->m.precision);
            if (!sl->xq || !sl->wq || (!shared && !sl->wpack))
                return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory for quantized operands "
                                "(%.1f MiB per Linear)", (N * IN + (size_t)O * IN) * 4.0 / 1048576);
        }
    return 0;
}

void trainer_quant_free(struct trainer *t)
{
    satstats_destroy(t->sat);
    t->sat = NULL;
    quant_set_destroy(t->qset);
    t->qset = NULL;
    for (int s = 0; s < t->n_slots && !t->cfg.recompute; s++) {
        qs_free(t->slots[s].xq);
        qs_free(t->slots[s].wq);
    }
    for (int s = 0; s < t->n_slots; s++)
        matmul_wpack_destroy(t->slots[s].wpack);
    for (int k = 0; k < MODEL_LIN_COUNT; k++) {
        qs_free(t->mod_xq[k]);
        qs_free(t->mod_wq[k]);
        t->mod_xq[k] = t->mod_wq[k] = NULL;
    }
    qs_free(t->slots);
    qs_free(t->slot_of);
    qs_free(t->spike_x);
    t->spike_x = NULL;
    t->slots = NULL;
    t->slot_of = NULL;
    t->n_slots = 0;
    qplan_free(&t->plan);
}

int trainer_spike_events(struct trainer *t, qs_diag *d)
{
    for (int s = 0; t->spike_x && s < t->n_slots; s++) {
        const trainer_qslot *sl = &t->slots[s];
        if (sl->spike_step != t->step)
            continue;
        char line[2 * QUANT_NAME_MAX + 160], name[2 * QUANT_NAME_MAX + 8];
        qs_json_quote(name, sizeof name, quant_name(quant_set_get(t->qset, sl->q_input)));
        snprintf(line, sizeof line,
                 "{\"step\":%ld,\"type\":\"spike\",\"tensor\":%s,\"row\":%d,\"scale\":%.9g,"
                 "\"amax\":%.9g}", t->step, name, sl->spike_row, (double)t->spike.scale,
                 (double)sl->spike_amax);
        int rc = trainer_event_append(t->run_dir, line, d);
        if (rc)
            return rc;
    }
    return 0;
}
