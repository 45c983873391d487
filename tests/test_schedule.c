/* test_schedule.c: lr warmup/decay and bf16-warmup -> QAT phases. */
#include "qs/schedule.h"
#include "test.h"

TEST(schedule, linear_warmup_reaches_lr_at_its_last_step)
{
    schedule s = {1e-3, 0.0, 4, 100, SCHEDULE_DECAY_CONSTANT, 0, 0};
    ASSERT_NEAR(schedule_lr(&s, 0), 0.25e-3, 1e-15);
    ASSERT_NEAR(schedule_lr(&s, 3), 1e-3, 1e-15);
    ASSERT_NEAR(schedule_lr(&s, 50), 1e-3, 1e-15);
    ASSERT_NEAR(schedule_lr(&s, 1000), 1e-3, 1e-15);
}

TEST(schedule, cosine_decays_to_the_floor_at_the_last_step)
{
    schedule s = {1e-3, 1e-4, 10, 110, SCHEDULE_DECAY_COSINE, 0, 0};
    ASSERT_NEAR(schedule_lr(&s, 10), 1e-3, 1e-15);
    ASSERT_NEAR(schedule_lr(&s, 60), 1e-4 + 0.5 * 9e-4, 1e-12);
    ASSERT_NEAR(schedule_lr(&s, 110), 1e-4, 1e-15);
    ASSERT_NEAR(schedule_lr(&s, 500), 1e-4, 1e-15);
    ASSERT_TRUE(schedule_lr(&s, 30) > schedule_lr(&s, 31));
}

TEST(schedule, qat_starts_after_bf16_warmup)
{
    schedule s = {1e-5, 0.0, 0, 1000, SCHEDULE_DECAY_CONSTANT, 1, 500};
    ASSERT_EQ_INT(schedule_phase(&s, 0), SCHEDULE_PHASE_WARMUP);
    ASSERT_EQ_INT(schedule_phase(&s, 499), SCHEDULE_PHASE_WARMUP);
    ASSERT_EQ_INT(schedule_phase(&s, 500), SCHEDULE_PHASE_QAT);
    ASSERT_EQ_STR(schedule_phase_name(schedule_phase(&s, 500)), "qat");
    s.qat = 0;
    ASSERT_EQ_INT(schedule_phase(&s, 900), SCHEDULE_PHASE_WARMUP);
    s.qat = 1;
    s.bf16_warmup_steps = 0;
    ASSERT_EQ_INT(schedule_phase(&s, 0), SCHEDULE_PHASE_QAT);
}

TEST(schedule, validate_rejects_floor_above_peak)
{
    schedule s = {1e-5, 1e-4, 0, 10, SCHEDULE_DECAY_COSINE, 0, 0};
    qs_diag d = {0};
    ASSERT_EQ_INT(schedule_validate(&s, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "lr_min") != NULL);
    ASSERT_EQ_INT(schedule_decay_parse("cosine"), SCHEDULE_DECAY_COSINE);
    ASSERT_EQ_INT(schedule_decay_parse("linear"), -1);
}
