/* test_forget.c: the forgetting alarm on crafted correctness series and metrics files. */
#include <stdio.h>

#include "qs/forget.h"
#include "qs/mem.h"
#include "test.h"

enum { N_ITEMS = 200 };

/* correctness vector: items [0, right) correct, then `gained` extra from index 150 */
static void make(unsigned char *v, int right, int gained)
{
    for (int i = 0; i < N_ITEMS; i++)
        v[i] = i < right || (i >= 150 && i < 150 + gained);
}

TEST(forget, significant_drop_raises_alarm_with_event)
{
    unsigned char base[N_ITEMS], cur[N_ITEMS];
    make(base, 100, 0);
    make(cur, 80, 2);   /* b = 20, c = 2: -9 pp, p = 2*(1+22+231)/2^22 */
    forget_opts o;
    forget_opts_default(&o);
    forget_result r;
    ASSERT_OK(forget_check("arc_easy", 1000, base, cur, N_ITEMS, &o, &r, NULL), NULL);
    ASSERT_EQ_INT(r.alarm, 1);
    ASSERT_EQ_INT(r.stop, 0);
    ASSERT_NEAR(r.drop_points, 9.0, 1e-9);
    ASSERT_NEAR(r.p_value, 2.0 * 254.0 / 4194304.0, 1e-15);
    ASSERT_TRUE(strstr(r.warning, "arc_easy at step 1000") && strstr(r.warning, "drop 9.00 pp"));
    ASSERT_TRUE(strstr(r.event_json, "\"type\":\"forgetting\"") &&
                strstr(r.event_json, "\"step\":1000") && strstr(r.event_json, "\"drop_points\":9"));
    o.stop_on_forgetting = 1;
    ASSERT_OK(forget_check("arc_easy", 1000, base, cur, N_ITEMS, &o, &r, NULL), NULL);
    ASSERT_EQ_INT(r.stop, 1);
}

TEST(forget, large_but_insignificant_drop_is_quiet)
{
    unsigned char base[N_ITEMS], cur[N_ITEMS];
    make(base, 100, 0);
    make(cur, 95, 0);   /* -2.5 pp, b = 5, c = 0: p = 0.0625 */
    forget_opts o;
    forget_opts_default(&o);
    forget_result r;
    ASSERT_OK(forget_check("hellaswag", 500, base, cur, N_ITEMS, &o, &r, NULL), NULL);
    ASSERT_NEAR(r.p_value, 0.0625, 1e-15);
    ASSERT_EQ_INT(r.alarm, 0);
    ASSERT_EQ_INT((int)strlen(r.warning), 0);
    /* significant but within X points is quiet too */
    o.max_drop_points = 10.0;
    make(cur, 82, 0);
    ASSERT_OK(forget_check("hellaswag", 500, base, cur, N_ITEMS, &o, &r, NULL), NULL);
    ASSERT_TRUE(r.p_value < 0.05);
    ASSERT_EQ_INT(r.alarm, 0);
}

TEST(forget, series_scan_finds_first_significant_step_and_stops)
{
    static unsigned char v[6][N_ITEMS];
    make(v[0], 100, 0);   /* step 0: baseline arc */
    make(v[1], 120, 0);   /* step 0: baseline mmlu */
    make(v[2], 99, 0);    /* step 100: arc -0.5 pp */
    make(v[3], 96, 0);    /* step 200: arc -2 pp, p = 0.125: quiet */
    make(v[4], 110, 0);   /* step 200: mmlu -5 pp, b = 10, c = 0: alarm */
    make(v[5], 85, 0);    /* step 300: arc -7.5 pp: alarm */
    forget_eval s[] = {{0, "arc_easy", v[0], N_ITEMS}, {0, "mmlu", v[1], N_ITEMS},
                       {100, "arc_easy", v[2], N_ITEMS}, {200, "arc_easy", v[3], N_ITEMS},
                       {200, "mmlu", v[4], N_ITEMS}, {300, "arc_easy", v[5], N_ITEMS}};
    forget_opts o;
    forget_opts_default(&o);
    forget_result alarms[4];
    int n = 0;
    ASSERT_OK(forget_series_scan(s, 6, &o, alarms, 4, &n, NULL), NULL);
    ASSERT_EQ_INT(n, 2);
    ASSERT_EQ_STR(alarms[0].task, "mmlu");
    ASSERT_EQ_INT(alarms[0].step, 200);
    ASSERT_EQ_STR(alarms[1].task, "arc_easy");
    ASSERT_EQ_INT(alarms[1].step, 300);
    o.stop_on_forgetting = 1;
    ASSERT_OK(forget_series_scan(s, 6, &o, alarms, 4, &n, NULL), NULL);
    ASSERT_EQ_INT(n, 1);
    ASSERT_EQ_INT(alarms[0].stop, 1);
    /* a different item count than the baseline is refused */
    s[5].n_items = N_ITEMS - 1;
    o.stop_on_forgetting = 0;
    ASSERT_EQ_INT(forget_series_scan(s, 6, &o, alarms, 4, &n, NULL), QS_EINVAL);
}

static void items_str(char *buf, int right)
{
    for (int i = 0; i < N_ITEMS; i++)
        buf[i] = i < right ? '1' : '0';
    buf[N_ITEMS] = 0;
}

TEST(forget, metrics_file_scan_uses_default_metric_items)
{
    char path[512], a[N_ITEMS + 1], b[N_ITEMS + 1], c[N_ITEMS + 1];
    snprintf(path, sizeof path, "%s/forget_metrics.jsonl", test_tmp_dir());
    FILE *f = fopen(path, "w");
    ASSERT_TRUE(f != NULL);
    items_str(a, 100);
    items_str(b, 100);
    items_str(c, 70);
    /* hellaswag compares acc_norm: acc items collapse at step 300 but acc_norm items do not
     * until step 600 */
    fprintf(f, "{\"type\":\"eval\",\"step\":0,\"tasks\":{\"hellaswag\":{\"acc\":0.5,\"acc_norm\":0.5,"
               "\"n\":200,\"items_acc\":\"%s\",\"items_acc_norm\":\"%s\"}},\"val_loss\":3.1}\n", a, a);
    fprintf(f, "{\"type\":\"train\",\"step\":1,\"phase\":\"warmup\",\"loss\":3.2,\"lr\":1e-5}\n");
    fprintf(f, "{\"type\":\"eval\",\"step\":300,\"tasks\":{\"hellaswag\":{\"acc\":0.35,\"acc_norm\":0.5,"
               "\"n\":200,\"items_acc\":\"%s\",\"items_acc_norm\":\"%s\"}}}\n", c, b);
    fprintf(f, "{\"type\":\"eval\",\"step\":600,\"tasks\":{\"hellaswag\":{\"acc\":0.35,\"acc_norm\":0.35,"
               "\"n\":200,\"items_acc\":\"%s\",\"items_acc_norm\":\"%s\"}}}\n", c, c);
    fclose(f);
    forget_opts o;
    forget_opts_default(&o);
    forget_result al[4];
    int n;
    qs_diag d = {0};
    ASSERT_OK(forget_metrics_scan(path, "", &o, al, 4, &n, &d), &d);
    ASSERT_EQ_INT(n, 1);
    ASSERT_EQ_INT(al[0].step, 600);
    ASSERT_NEAR(al[0].drop_points, 15.0, 1e-9);
    ASSERT_OK(forget_metrics_scan(path, "acc", &o, al, 4, &n, &d), &d);
    ASSERT_EQ_INT(n, 2);
    ASSERT_EQ_INT(al[0].step, 300);
}

TEST(forget, metrics_file_with_bad_items_names_line)
{
    char path[512];
    snprintf(path, sizeof path, "%s/forget_bad.jsonl", test_tmp_dir());
    FILE *f = fopen(path, "w");
    ASSERT_TRUE(f != NULL);
    fprintf(f, "{\"type\":\"train\",\"step\":1}\n");
    fprintf(f, "{\"type\":\"eval\",\"step\":0,\"tasks\":{\"mmlu\":{\"acc\":0.5,\"items_acc\":\"01x\"}}}\n");
    fclose(f);
    forget_opts o;
    forget_opts_default(&o);
    forget_result al[1];
    int n;
    qs_diag d = {0};
    ASSERT_EQ_INT(forget_metrics_scan(path, "", &o, al, 1, &n, &d), QS_EFORMAT);
    ASSERT_EQ_INT(d.line, 2);
    ASSERT_TRUE(strstr(d.msg, "character 2 is 'x'") != NULL);
}

TEST(forget, tracker_keeps_first_eval_as_baseline)
{
    static unsigned char base[N_ITEMS], ok[N_ITEMS], bad[N_ITEMS];
    make(base, 100, 0);
    make(ok, 99, 0);
    make(bad, 80, 0);
    forget_opts o;
    forget_opts_default(&o);
    o.stop_on_forgetting = 1;
    forget_tracker *t;
    ASSERT_OK(forget_tracker_create(&t, &o, NULL), NULL);
    forget_result r;
    ASSERT_OK(forget_tracker_observe(t, "mmlu", 0, base, N_ITEMS, &r, NULL), NULL);
    ASSERT_EQ_INT(r.is_baseline, 1);
    ASSERT_EQ_INT(r.alarm, 0);
    ASSERT_OK(forget_tracker_observe(t, "arc_easy", 0, ok, N_ITEMS, &r, NULL), NULL);
    ASSERT_EQ_INT(r.is_baseline, 1);
    ASSERT_OK(forget_tracker_observe(t, "mmlu", 100, ok, N_ITEMS, &r, NULL), NULL);
    ASSERT_EQ_INT(r.is_baseline, 0);
    ASSERT_EQ_INT(r.alarm, 0);
    ASSERT_OK(forget_tracker_observe(t, "mmlu", 200, bad, N_ITEMS, &r, NULL), NULL);
    ASSERT_EQ_INT(r.alarm, 1);
    ASSERT_EQ_INT(r.stop, 1);
    ASSERT_NEAR(r.drop_points, 10.0, 1e-9);
    /* arc_easy's baseline is its own first eval, not mmlu's */
    ASSERT_OK(forget_tracker_observe(t, "arc_easy", 200, ok, N_ITEMS, &r, NULL), NULL);
    ASSERT_NEAR(r.drop_points, 0.0, 0);
    ASSERT_EQ_INT(forget_tracker_observe(t, "mmlu", 300, bad, N_ITEMS - 1, &r, NULL), QS_EINVAL);
    forget_tracker_destroy(t);
}

/* a resumed run's tracker: the saved baselines come back, so the first evaluation
 * after the resume is checked against the step-0 baseline (and alarms), not taken
 * as a new baseline; damaged bytes are refused and leave no baseline behind */
TEST(forget, tracker_baselines_survive_save_and_restore)
{
    static unsigned char base[N_ITEMS], bad[N_ITEMS];
    make(base, 100, 0);
    make(bad, 80, 0);
    forget_opts o;
    forget_opts_default(&o);
    forget_tracker *a, *b;
    forget_result r;
    ASSERT_OK(forget_tracker_create(&a, &o, NULL), NULL);
    ASSERT_OK(forget_tracker_create(&b, &o, NULL), NULL);
    ASSERT_OK(forget_tracker_observe(a, "mmlu", 0, base, N_ITEMS, &r, NULL), NULL);
    ASSERT_OK(forget_tracker_observe(a, "arc_easy", 0, bad, N_ITEMS, &r, NULL), NULL);
    void *bytes;
    size_t n;
    ASSERT_OK(forget_tracker_save(a, &bytes, &n, NULL), NULL);
    ASSERT_EQ_INT(n, 4 + 2 * 12 + strlen("mmlu") + strlen("arc_easy") + 2 * N_ITEMS);
    ASSERT_OK(forget_tracker_restore(b, bytes, n, NULL), NULL);
    ASSERT_OK(forget_tracker_observe(b, "mmlu", 100, bad, N_ITEMS, &r, NULL), NULL);
    ASSERT_EQ_INT(r.is_baseline, 0);
    ASSERT_EQ_INT(r.alarm, 1);
    ASSERT_OK(forget_tracker_observe(b, "arc_easy", 100, bad, N_ITEMS, &r, NULL), NULL);
    ASSERT_EQ_INT(r.is_baseline, 0);
    ASSERT_NEAR(r.drop_points, 0.0, 0);
    /* damaged: cut, an item that is not 0/1, a trailing byte */
    qs_diag d = {0};
    unsigned char *p = bytes;
    ASSERT_EQ_INT(forget_tracker_restore(b, p, n - 1, &d), QS_EFORMAT);
    ASSERT_OK(forget_tracker_observe(b, "mmlu", 200, bad, N_ITEMS, &r, NULL), NULL);
    ASSERT_EQ_INT(r.is_baseline, 1);   /* the failed restore left no baseline */
    p[n - 1] = 2;
    ASSERT_EQ_INT(forget_tracker_restore(b, p, n, &d), QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "expected 0 or 1") != NULL);
    p[n - 1] = 0;
    unsigned char *longer = qs_malloc(n + 1);
    ASSERT_TRUE(longer != NULL);
    memcpy(longer, p, n);
    longer[n] = 0;
    ASSERT_EQ_INT(forget_tracker_restore(b, longer, n + 1, &d), QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "trailing") != NULL);
    qs_free(longer);
    qs_free(bytes);
    forget_tracker_destroy(a);
    forget_tracker_destroy(b);
}
