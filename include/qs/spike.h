/* spike.h: the spike injector - massive activations on demand (opt-in).
 *
 * Small models lack the rare, huge activation outliers of LLMs that make a
 * delayed amax estimate clip.  The injector plants them: on a seeded random
 * subset of training steps it multiplies ONE token's row of a planned Linear's
 * input by `scale`, as the quantizer sees it.  The decision is a pure function
 * of (seed, step, Linear, rows): nothing to checkpoint, a resumed run injects
 * exactly what the uninterrupted one would.
 *
 * How the trainer applies it (src/train/trainer_quant.c): the quantizer gets
 * the spiked copy (observe during the BF16 warmup: its amax enters the
 * history; quantize during QAT: scale, clipping and every statistic are those
 * of the spiked tensor, as quant.jsonl.zst records them), and the row is
 * divided by `scale` again after the fake-quant, so the Linear computes what it
 * would have, on the spiked tensor's grid: exact in the warmup (the matmul uses
 * the unquantized input), and under QAT the spiked row is cut at predicted
 * amax / scale where the scale was mis-predicted: the damage of a clipped
 * outlier, without giving the model a function it never learned.  Each spike is
 * an events.jsonl record {"step","type":"spike","tensor","row","scale","amax"}
 * (amax: the spiked row's, max over the step's micro-batches).
 */
#ifndef QS_SPIKE_H
#define QS_SPIKE_H

#include <stddef.h>
#include <stdint.h>

typedef struct spike_plan {
    uint64_t seed;
    double rate;     /* probability per (step, planned Linear); 0 = off */
    float scale;     /* factor of the spiked row, > 1 */
} spike_plan;

/* 1 when the input of Linear `linear_id` gets a spike at `step`, with the
 * token row in *row (uniform in [0, n_rows)); 0 otherwise. */
int spike_pick(const spike_plan *p, long step, int linear_id, int n_rows, int *row);

/* x[row * cols .. + cols) *= factor; returns max |x| of the row after it. */
float spike_row_mul(float *x, int row, int cols, float factor);
/* x[row * cols .. + cols) /= divisor (exact inverse of a power-of-two factor). */
void spike_row_div(float *x, int row, int cols, float divisor);

#endif
