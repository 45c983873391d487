/* test_quant_apply.c: the frozen (inference) mode of a quantizer: the same
 * fake-quant as quantize() at the current scale, and nothing recorded. */
#include <math.h>
#include <string.h>

#include "qs/quant.h"
#include "test.h"

TEST(quant_apply, same_values_as_quantize_and_records_nothing)
{
    quant_recipe r;
    quant_recipe_default(&r);
    ASSERT_OK(amax_estimator_parse("max-window:4", &r.est, NULL), NULL);
    const char *names[] = {"a.input"};
    quant_set *s;
    qs_diag d = {0};
    ASSERT_OK(quant_set_create(&s, &r, names, 1, &d), &d);
    quant *q = quant_set_get(s, 0);
    float x[64], y1[64], y2[64];
    for (int i = 0; i < 64; i++)
        x[i] = (float)sin(i * 0.7) * (i == 5 ? 3.0f : 1.0f);
    const quant_record *recs;
    ASSERT_OK(quant_quantize(q, x, y1, 64, &d), &d);   /* history gets amax 3 */
    quant_set_step_end(s, &recs);
    x[5] = 10.0f;   /* above the history's amax: clips at the frozen scale */
    float scale_before = quant_last_scale(q);
    ASSERT_OK(quant_apply(q, x, y2, 64, &d), &d);
    ASSERT_TRUE(quant_last_scale(q) == scale_before);
    ASSERT_EQ_INT(quant_history(q)->len_steps, 1);
    quant_set_step_end(s, &recs);
    ASSERT_EQ_INT(recs[0].mode, QUANT_MODE_NONE);   /* the apply left no record */
    ASSERT_EQ_INT(quant_history(q)->len_steps, 1);
    ASSERT_TRUE(fabsf(y2[5]) < 10.0f);               /* clipped at the history's scale */
    ASSERT_OK(quant_quantize(q, x, y1, 64, &d), &d);
    ASSERT_TRUE(memcmp(y1, y2, sizeof y1) == 0);      /* what quantize() gives now */
    x[7] = NAN;
    ASSERT_EQ_INT(quant_apply(q, x, y2, 64, &d), QS_ENAN);
    quant_set_destroy(s);
}
