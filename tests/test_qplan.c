/* test_qplan.c: default selection and pattern grammar of quantized linears. */
#include "qs/qplan.h"
#include "test.h"

TEST(qplan, default_is_mlp_of_middle_blocks)
{
    qplan p;
    ASSERT_EQ_INT(qplan_init(&p, 28), 0);
    qs_diag d = {0};
    ASSERT_OK(qplan_apply(&p, "default", &d), &d);
    ASSERT_EQ_INT(qplan_count(&p), 23 * 3);
    ASSERT_TRUE(!qplan_is_on(&p, 2, QPLAN_GATE));
    ASSERT_TRUE(qplan_is_on(&p, 3, QPLAN_GATE));
    ASSERT_TRUE(qplan_is_on(&p, 25, QPLAN_DOWN));
    ASSERT_TRUE(!qplan_is_on(&p, 26, QPLAN_UP));
    ASSERT_TRUE(!qplan_is_on(&p, 10, QPLAN_O));
    qplan_free(&p);
}

TEST(qplan, layer_range_pattern_selects_inclusive_range)
{
    qplan p;
    ASSERT_EQ_INT(qplan_init(&p, 30), 0);
    qs_diag d = {0};
    ASSERT_OK(qplan_apply(&p, "layers.3-23.mlp.*", &d), &d);
    ASSERT_EQ_INT(qplan_count(&p), 21 * 3);
    ASSERT_TRUE(!qplan_is_on(&p, 24, QPLAN_GATE));
    ASSERT_TRUE(qplan_is_on(&p, 23, QPLAN_DOWN));
    ASSERT_TRUE(!qplan_is_on(&p, 2, QPLAN_DOWN));
    qplan_free(&p);
}

TEST(qplan, star_crosses_dots_and_bang_removes)
{
    qplan p;
    ASSERT_EQ_INT(qplan_init(&p, 12), 0);
    qs_diag d = {0};
    ASSERT_OK(qplan_apply(&p, "*.self_attn.o_proj", &d), &d);
    ASSERT_EQ_INT(qplan_count(&p), 12);
    ASSERT_OK(qplan_apply(&p, "!layers.1*.self_attn.*", &d), &d); /* 1, 10, 11 */
    ASSERT_EQ_INT(qplan_count(&p), 9);
    ASSERT_TRUE(!qplan_is_on(&p, 10, QPLAN_O));
    ASSERT_TRUE(qplan_is_on(&p, 2, QPLAN_O));
    qplan_free(&p);
}

TEST(qplan, literal_layer_number_does_not_match_prefix)
{
    ASSERT_TRUE(qplan_pattern_match("layers.3.mlp.up_proj", "layers.3.mlp.up_proj"));
    ASSERT_TRUE(!qplan_pattern_match("layers.3.mlp.up_proj", "layers.30.mlp.up_proj"));
    ASSERT_TRUE(!qplan_pattern_match("layers.3-5.mlp.*", "layers.35.mlp.up_proj"));
    ASSERT_TRUE(qplan_pattern_match("layers.3-5.mlp.*", "layers.5.mlp.up_proj"));
}

TEST(qplan, pattern_matching_nothing_is_an_error_naming_it)
{
    qplan p;
    ASSERT_EQ_INT(qplan_init(&p, 8), 0);
    qs_diag d = {0};
    ASSERT_EQ_INT(qplan_apply(&p, "layers.*.mlp.gate", &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "'layers.*.mlp.gate'") != NULL);
    ASSERT_EQ_INT(qplan_apply(&p, "!", &d), QS_EINVAL);
    qplan_free(&p);
}

TEST(qplan, default_on_tiny_model_selects_nothing)
{
    qplan p;
    ASSERT_EQ_INT(qplan_init(&p, 5), 0);
    qplan_set_default(&p);
    ASSERT_EQ_INT(qplan_count(&p), 0);
    qplan_free(&p);
}
