/* trainer_dist.c: the trainer across ranks (data parallelism, ZeRO-1).
 *
 * One optimizer step of N ranks is the step one process takes with
 * grad_accum x N micro-batches, bit for bit (README "Past one machine"):
 *   - micro-batch j of the step belongs to rank j / grad_accum; every rank
 *     reads the whole step's batches in order and skips the others' (so each
 *     loader's position, and the checkpointed one, is the global position);
 *   - each micro-batch's gradient is computed onto zeros (a rank's first one in
 *     the grads block, later ones in a scratch block added in order), scaled by
 *     1 / (grad_accum x N); the ranks' sums are added in rank order
 *     (dist_allreduce_sum_f32), which is micro-batch order when grad_accum is 1;
 *   - the loss sum and every quantizer's step record are combined the same way:
 *     amax / predicted amax MAX, element / clip / underflow counts summed,
 *     squared-error sums added in rank order, the mode and flags OR-ed, the scale
 *     of the last call taken from the last rank; each quantizer's call counter
 *     (where its QSNR sample sits) advances by the other ranks' calls too;
 *   - AdamW runs on identical gradients, so every rank holds identical weights;
 *     with zero: 1 rank r keeps the moments of [lo[r], lo[r+1]) only, updates
 *     that part of the parameters (AdamW is element-wise: the same bits) and the
 *     parts are all-gathered.
 * With grad_accum > 1 per rank the rank sums are ((g0 + g1) + (g2 + g3)) where
 * one process adds (((g0 + g1) + g2) + g3): equal only up to rounding.
 * Only rank 0 writes the run directory; a checkpoint is the one-process format
 * (ZeRO moments are streamed to rank 0 as it writes them).
 */
#include <string.h>

#include "qs/dist.h"
#include "qs/mem.h"
#include "trainer_impl.h"

int trainer_dist_init(struct trainer *t, qs_diag *d)
{
    t->rank = dist_rank();
    t->n_ranks = dist_size();
    size_t n = t->m.n_params;
    if (t->cfg.zero && t->n_ranks > 1) {
        t->shard_lo = qs_malloc((2 * (size_t)t->n_ranks + 1) * sizeof *t->shard_lo);
        if (!t->shard_lo)
            return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
        for (int r = 0; r <= t->n_ranks; r++)   /* 64-element boundaries; the last ends at n */
            t->shard_lo[r] = r == t->n_ranks ? n : (n * (size_t)r / (size_t)t->n_ranks) & ~(size_t)63;
        t->shard_bytes = t->shard_lo + t->n_ranks + 1;
        for (int r = 0; r < t->n_ranks; r++)
            t->shard_bytes[r] = (t->shard_lo[r + 1] - t->shard_lo[r]) * sizeof(float);
    }
    if (t->cfg.grad_accum > 1) {
        t->grad_scratch = qs_calloc(n, sizeof *t->grad_scratch);
        t->gsw.layer = qs_calloc((size_t)t->m.cfg.n_layers, sizeof *t->gsw.layer);
        if (!t->grad_scratch || !t->gsw.layer)
            return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory for the gradient scratch block");
        return model_weights_point(&t->gsw, &t->m, t->grad_scratch);
    }
    return 0;
}

void trainer_dist_free(struct trainer *t)
{
    qs_free(t->shard_lo);
    qs_free(t->grad_scratch);
    qs_free(t->gsw.layer);
    t->shard_lo = NULL;
    t->grad_scratch = NULL;
    t->gsw.layer = NULL;
}

size_t trainer_dist_opt_elems(const struct trainer *t)
{
    return t->shard_lo ? t->shard_lo[t->rank + 1] - t->shard_lo[t->rank] : t->m.n_params;
}

size_t trainer_dist_opt_first(const struct trainer *t)
{
    return t->shard_lo ? t->shard_lo[t->rank] : 0;
}

int trainer_data_skip(struct trainer *t, long n_batches, qs_diag *d)
{
    int B = (int)t->cfg.batch_size, T = (int)t->cfg.seq_len, rc;
    for (long i = 0; i < n_batches; i++)
        if ((rc = t->data->next(t->data->self, t->tokens, t->targets, B, T, d)))
            return rc;
    return 0;
}

/* Every quantizer's step record, combined over the ranks (see the header). */
static int trainer_dist_quant_reduce(struct trainer *t, qs_diag *d)
{
    int nq = quant_set_count(t->qset), rc;
    size_t n = (size_t)nq;
    int64_t *iv = qs_malloc(n * 7 * sizeof *iv);
    float *fv = qs_malloc(n * 3 * sizeof *fv);
    double *dv = qs_malloc(n * 2 * sizeof *dv);
    quant_record *rec = qs_malloc(n * sizeof *rec);
    if (!iv || !fv || !dv || !rec) {
        rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
        goto out;
    }
    int64_t *imax = iv, *isum = iv + 4 * n;
    float *fmax = fv, *scale = fv + 2 * n;
    for (int i = 0; i < nq; i++) {
        quant_record *r = &rec[i];
        quant_step_record_get(quant_set_get(t->qset, i), r);
        imax[4 * i] = r->mode;
        imax[4 * i + 1] = r->has_pred;
        imax[4 * i + 2] = r->fallback;
        imax[4 * i + 3] = r->has_sq;
        isum[3 * i] = (int64_t)r->n_elems;
        isum[3 * i + 1] = (int64_t)r->n_clip;
        isum[3 * i + 2] = (int64_t)r->n_under;
        fmax[2 * i] = r->pred_amax;
        fmax[2 * i + 1] = r->amax;
        scale[i] = r->scale;
        dv[2 * i] = r->sq_err;
        dv[2 * i + 1] = r->sq_sum;
    }
    if ((rc = dist_allreduce_max_i64(imax, 4 * n, d)) ||
        (rc = dist_allreduce_sum_i64(isum, 3 * n, d)) ||
        (rc = dist_allreduce_max_f32(fmax, 2 * n, d)) ||
        (rc = dist_bcast(scale, n * sizeof *scale, t->n_ranks - 1, d)) ||
        (rc = dist_allreduce_sum_f64(dv, 2 * n, d)))
        goto out;
    for (int i = 0; i < nq; i++) {
        quant_record *r = &rec[i];
        r->mode = (int)imax[4 * i];
        r->has_pred = (int)imax[4 * i + 1];
        r->fallback = (int)imax[4 * i + 2];
        r->has_sq = (int)imax[4 * i + 3];
        r->n_elems = (size_t)isum[3 * i];
        r->n_clip = (size_t)isum[3 * i + 1];
        r->n_under = (size_t)isum[3 * i + 2];
        r->pred_amax = fmax[2 * i];
        r->amax = fmax[2 * i + 1];
        r->scale = scale[i];
        r->sq_err = dv[2 * i];
        r->sq_sum = dv[2 * i + 1];
        quant_step_record_set(quant_set_get(t->qset, i), r);
    }
out:
    qs_free(iv);
    qs_free(fv);
    qs_free(dv);
    qs_free(rec);
    return rc;
}

int trainer_dist_reduce(struct trainer *t, double *loss_sum, qs_diag *d)
{
    if (t->n_ranks == 1)
        return 0;
    int rc = dist_allreduce_sum_f32(t->grads, t->m.n_params, d);
    if (!rc)
        rc = dist_allreduce_sum_f64(loss_sum, 1, d);
    if (!rc && t->qset)
        rc = trainer_dist_quant_reduce(t, d);
    return rc;
}

static void trainer_repack_segment(void *ctx, size_t lo, size_t hi)
{
    model_packs_repack_range(ctx, lo, hi);
}

int trainer_dist_update(struct trainer *t, float clip, double lr, qs_diag *d)
{
    if (!t->shard_lo) {
        /* with weight packs: AdamW weight by weight, each weight's packs
         * re-made right after its update, from cache (made at their next use,
         * from memory, the packs of a dim-768 bf16 step took 180 ms; now 95) */
        size_t *ends = t->m.packs ? qs_malloc(((size_t)t->m.cfg.n_layers * MODEL_LIN_COUNT + 1) *
                                              sizeof *ends)
                                  : NULL;
        if (ends)
            adamw_step_scaled_segments(&t->opt, t->m.params, t->grads, clip, 1, lr, &t->hp,
                                       ends, model_packs_ends(&t->m, ends),
                                       trainer_repack_segment, &t->m);
        else {
            adamw_step_scaled(&t->opt, t->m.params, t->grads, clip, 1, lr, &t->hp);
            model_packs_refresh(&t->m);
        }
        qs_free(ends);
        return 0;
    }
    size_t lo = t->shard_lo[t->rank], hi = t->shard_lo[t->rank + 1];
    adamw_step_scaled(&t->opt, t->m.params + lo, t->grads + lo, clip, 1, lr, &t->hp);
    memset(t->grads, 0, lo * sizeof *t->grads);
    memset(t->grads + hi, 0, (t->m.n_params - hi) * sizeof *t->grads);
    int rc = dist_allgather_f32(t->m.params, t->shard_lo, d);
    model_packs_refresh(&t->m);   /* the other ranks' parts arrived just now */
    return rc;
}

typedef struct trainer_moment_sink {
    trainstate_writer *w;   /* NULL: drop the bytes (rank 0 after a failure) */
} trainer_moment_sink;

static int trainer_moment_put(void *ctx, const void *data, size_t n, qs_diag *d)
{
    trainer_moment_sink *s = ctx;
    return s->w ? trainstate_write_section_part(s->w, data, n, d) : 0;
}

int trainer_dist_moment_write(struct trainer *t, trainstate_writer *w, const char *tag,
                              const float *mine, qs_diag *d)
{
    if (!t->shard_lo)   /* everything is here */
        return w ? trainstate_write_section(w, tag, mine, t->m.n_params * sizeof(float), d) : 0;
    trainer_moment_sink sink = {w};
    int rc = 0;
    if (w && t->rank == 0)
        rc = trainstate_write_section_begin(w, tag, t->m.n_params * sizeof(float), d);
    if (rc)
        sink.w = NULL;
    int rc2 = dist_gather_stream(mine, t->shard_bytes, 0, (size_t)1 << 24, trainer_moment_put, &sink, d);
    if (!rc)
        rc = rc2;
    if (!rc && w && t->rank == 0)
        rc = trainstate_write_section_end(w, d);
    return rc;
}
