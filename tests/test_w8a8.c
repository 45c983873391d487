/* test_w8a8.c: W8A8 inference on an exported HiF8 checkpoint agrees with
 * `eval --precision hif8` on its source bit for bit (the code-domain
 * arithmetic, evalquant.h): per item log-likelihoods, ppl and generate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qs/cpu.h"
#include "qs/fileio.h"
#include "qs/hif8.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_hif8.h"
#include "qs/quant.h"
#include "test.h"

static char w8_out[32768], w8_err[4096];

static int w8_cli(const char *args)
{
    int rc = test_run_cli(args, w8_out, sizeof w8_out, w8_err, sizeof w8_err);
    if (rc)
        fprintf(stderr, "    %s\n    -> %d: %s", args, rc, w8_err);
    return rc;
}

static int w8_same_file(const char *a, const char *b)
{
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    int same = !fileio_read_all(a, &x, &nx, NULL) && !fileio_read_all(b, &y, &ny, NULL) &&
               nx == ny && nx > 0 && !memcmp(x, y, nx);
    qs_free(x);
    qs_free(y);
    return same;
}

/* export SRC with FLAGS, then eval the export (bf16: the real path) and the
 * source (hif8: evalquant's fake-quant on FLAGS' modules) on the same items:
 * the per-item logs must be identical files */
static int w8_agree(const char *name, const char *src, const char *flags, const char *tasks,
                    const char *limit)
{
    char bench[512], out[600], args[4096], sa[700], sb[700];
    if (!test_shared_path(bench, sizeof bench, "bench"))
        return -1;
    snprintf(out, sizeof out, "%s/w8_%s", test_tmp_dir(), name);
    snprintf(args, sizeof args, "export --format hif8 --model %s --out %s %s", src, out, flags);
    if (w8_cli(args))
        return 1;
    snprintf(sa, sizeof sa, "%s/w8_%s_real.jsonl", test_tmp_dir(), name);
    snprintf(sb, sizeof sb, "%s/w8_%s_fake.jsonl", test_tmp_dir(), name);
    snprintf(args, sizeof args, "eval --model %s --tasks %s --data-dir %s --limit %s --precision "
             "bf16 --output %s/w8_%s_real.json --log-samples %s", out, tasks, bench, limit,
             test_tmp_dir(), name, sa);
    if (w8_cli(args) || !strstr(w8_out, "HiF8 checkpoint: W8A8 on"))
        return 2;
    /* the results file records the checkpoint's quantization like a fake-quant run's */
    char rpath[700], *res = NULL;
    size_t nres = 0;
    snprintf(rpath, sizeof rpath, "%s/w8_%s_real.json", test_tmp_dir(), name);
    if (fileio_read_all(rpath, &res, &nres, NULL))
        return 5;
    int recorded = strstr(res, "\"layers.") && !strstr(res, "\"quant_modules\": []") &&
                   strstr(res, "\"stored (");
    qs_free(res);
    if (!recorded)
        return 6;
    snprintf(args, sizeof args, "eval --model %s --tasks %s --data-dir %s --limit %s --precision "
             "hif8 %s --output %s/w8_%s_fake.json --log-samples %s", src, tasks, bench, limit,
             flags, test_tmp_dir(), name, sb);
    if (w8_cli(args))
        return 3;
    return w8_same_file(sa, sb) ? 0 : 4;
}

TEST(w8a8, stories260K_export_scores_like_fake_quant_bit_for_bit)
{
    char dir[512];
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    if (!test_shared_path(dir, sizeof dir, "models/stories260K"))
        SKIP("../shared/models/stories260K not present");
    /* an F32 checkpoint, current scaling: dynamic per-token input scales */
    int rc = w8_agree("s260k", dir, "--quant-modules '*.mlp.*'", "arc_easy,hellaswag", "24");
    if (rc < 0)
        SKIP("../shared/bench not present");
    ASSERT_EQ_INT(rc, 0);
}

TEST(w8a8, demo_export_of_middle_blocks_scores_like_fake_quant_bit_for_bit)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    /* attention and MLP of the middle blocks: the q/k/v and gate/up groups too */
    int rc = w8_agree("demo", "data/demo/model", "--quant-modules 'layers.2-5.*'",
                      "arc_easy,arc_challenge", "20");
    if (rc < 0)
        SKIP("../shared/bench not present");
    ASSERT_EQ_INT(rc, 0);
}

/* compare: the export (real path, bf16) against its source's hif8 eval
 * arithmetic over a text: KL exactly 0; and against fp32 it quantizes */
TEST(w8a8, compare_export_with_source_fake_quant_is_zero_kl)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char out[600], txt[600], args[4096];
    snprintf(out, sizeof out, "%s/w8_cmp", test_tmp_dir());
    snprintf(args, sizeof args, "export --format hif8 --model data/demo/model --out %s "
             "--quant-modules 'layers.1-6.mlp.*,layers.3.self_attn.*'", out);
    ASSERT_EQ_INT(w8_cli(args), 0);
    snprintf(txt, sizeof txt, "%s/w8.txt", test_tmp_dir());
    const char *s = "Lily saw a big dog in the park. The dog had a ball. Lily and the dog played "
                    "until the sun went down, and then they went home to eat.";
    ASSERT_OK(fileio_write_atomic(txt, s, strlen(s), NULL), NULL);
    snprintf(args, sizeof args, "compare --model %s --reference data/demo/model --text %s --json "
             "--precision bf16 --reference-precision hif8 --quant-modules "
             "'layers.1-6.mlp.*,layers.3.self_attn.*'", out, txt);
    ASSERT_EQ_INT(w8_cli(args), 0);
    ASSERT_TRUE(strstr(w8_out, "\"kl_max\": 0,") && strstr(w8_out, "\"top1_agree\": 1,"));
    snprintf(args, sizeof args, "compare --model %s --reference data/demo/model --text %s --json "
             "--precision bf16 --reference-precision bf16", out, txt);
    ASSERT_EQ_INT(w8_cli(args), 0);
    ASSERT_TRUE(strstr(w8_out, "\"kl_max\": 0,") == NULL);
    /* ppl reads the export too (real path) */
    snprintf(args, sizeof args, "ppl --model %s --text %s --precision bf16 --json", out, txt);
    ASSERT_EQ_INT(w8_cli(args), 0);
    ASSERT_TRUE(strstr(w8_out, "\"ppl\": ") != NULL);
}

/* hif8-fp32 is the export in fp32: on an F32 source (the other weights rounded
 * to bf16 inside fp32 packs) compare gives KL exactly 0 */
TEST(w8a8, stories260K_export_in_fp32_is_hif8_fp32_of_its_source)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char src[512], out[600], txt[600], args[4096];
    if (!test_shared_path(src, sizeof src, "models/stories260K"))
        SKIP("../shared/models/stories260K not present");
    snprintf(out, sizeof out, "%s/w8_s260k_fp32", test_tmp_dir());
    snprintf(args, sizeof args, "export --format hif8 --model %s --out %s --quant-modules "
             "'*.mlp.*'", src, out);
    ASSERT_EQ_INT(w8_cli(args), 0);
    snprintf(txt, sizeof txt, "%s/w8_fp32.txt", test_tmp_dir());
    const char *s = "Once upon a time, there was a little girl named Lily. She liked to play "
                    "outside with her friends and her dog.";
    ASSERT_OK(fileio_write_atomic(txt, s, strlen(s), NULL), NULL);
    snprintf(args, sizeof args, "compare --model %s --reference %s --text %s --json --precision "
             "fp32 --reference-precision hif8-fp32 --quant-modules '*.mlp.*'", out, src, txt);
    ASSERT_EQ_INT(w8_cli(args), 0);
    ASSERT_TRUE(strstr(w8_out, "\"kl_max\": 0,") && strstr(w8_out, "\"top1_agree\": 1,"));
    snprintf(args, sizeof args, "compare --model %s --reference %s --text %s --json --precision "
             "fp32 --reference-precision fp32", out, src, txt);
    ASSERT_EQ_INT(w8_cli(args), 0);
    ASSERT_TRUE(strstr(w8_out, "\"kl_max\": 0,") == NULL);
}

/* the real path on one Linear against the definition, element by element */
TEST(w8a8, forward_of_a_quantized_linear_is_the_documented_arithmetic)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char out[600], args[2048];
    snprintf(out, sizeof out, "%s/w8_one", test_tmp_dir());
    snprintf(args, sizeof args, "export --format hif8 --model data/demo/model --out %s "
             "--quant-modules 'layers.4.mlp.down_proj'", out);
    ASSERT_EQ_INT(w8_cli(args), 0);
    llama_model m;
    qs_diag d = {0};
    ASSERT_OK(model_load_dir(&m, out, &d), &d);
    ASSERT_TRUE(model_hif8_planned(&m, 4, MODEL_LIN_DOWN) && !model_hif8_planned(&m, 4, 5));
    const int N = 3, IN = m.cfg.hidden_dim, O = m.cfg.dim;
    float *x = qs_malloc((size_t)N * IN * sizeof *x), *y = qs_malloc((size_t)N * O * sizeof *y);
    float *xq = qs_malloc((size_t)N * IN * sizeof *xq), *wq = qs_malloc((size_t)O * IN * 4);
    ASSERT_TRUE(x && y && xq && wq);
    for (int i = 0; i < N * IN; i++)
        x[i] = (float)((i * 37 % 101) - 50) * (i % 7 == 0 ? 3.0f : 0.01f);
    for (int r = 0; r < IN; r++)
        x[2 * IN + r] = 0.0f;   /* an all-zero row: scale 1 */
    m.precision = 0;   /* MATMUL_FP32: fma in k order */
    ASSERT_OK(model_hif8_forward(&m, 4, MODEL_LIN_DOWN, y, x, NULL, N, IN, O, xq), NULL);
    const model_hif8 *h = m.hif8;
    model_hif8_weight_values(h, 0, wq);   /* decode(code), read back from the code pack */
    const float sw = h->lin[0].weight_scale;
    for (int r = 0; r < N; r++) {
        float amax = 0;
        for (int k = 0; k < IN; k++)
            amax = fabsf(x[r * IN + k]) > amax ? fabsf(x[r * IN + k]) : amax;
        float sx = 1.0f;
        if (amax > 0)
            ASSERT_OK(quant_scale_from_amax(amax, 0, &sx), NULL);
        for (int o = 0; o < O; o++) {
            double acc = 0, mag = 0;   /* exact products, summed in double */
            for (int k = 0; k < IN; k++) {
                double p = (double)hif8_decode(hif8_encode(x[r * IN + k] * sx, HIF8_SAT)) *
                           wq[(size_t)o * IN + k];
                acc += p;
                mag += fabs(p);
            }
            /* fp32 accumulation: <= IN u sum|p| (matmul.h), then two roundings */
            double f = 1.0 / ((double)sx * sw), want = acc * f;
            ASSERT_NEAR(y[r * O + o], want, (IN + 2) * 0x1p-24 * mag * f + 1e-30);
        }
    }
    qs_free(x);
    qs_free(y);
    qs_free(xq);
    qs_free(wq);
    model_free(&m);
}

/* Reference W8A8 of a HiF8 checkpoint's Linears as a code-domain hook (model.h,
 * fn returning 2): the weight decoded from the codes into an fp32 buffer and
 * packed per call (matmul_forward_ws, the path before code packs), inputs at
 * the stored scale or at 32768 / amax per row. */
typedef struct w8_ref {
    const model_hif8 *h;
    float rows[64];
} w8_ref;

static int w8_ref_planned(void *self, int layer, int module)
{
    return ((const w8_ref *)self)->h->slot[layer * MODEL_LIN_COUNT + module] >= 0;
}

static int w8_ref_hook(void *self, int layer, int module, const float *x, float *xq, int N, int IN,
                       const float *w, float *wq, int O)
{
    w8_ref *r = self;
    const int i = r->h->slot[layer * MODEL_LIN_COUNT + module];
    const model_hif8_linear *l = &r->h->lin[i];
    (void)w;
    (void)O;
    if (N > 64)
        return QS_ERANGE;
    model_hif8_weight_values(r->h, i, wq);
    for (int row = 0; row < N; row++) {
        const float *xr = x + (size_t)row * IN;
        float amax = 0.0f, sx = l->input_scale;
        for (int k = 0; k < IN; k++)
            amax = fabsf(xr[k]) > amax ? fabsf(xr[k]) : amax;
        if (sx == 0.0f && (sx = 1.0f, amax > 0) && quant_scale_from_amax(amax, 0, &sx))
            return QS_ENAN;
        for (int k = 0; k < IN; k++)
            xq[(size_t)row * IN + k] = hif8_decode(hif8_encode(xr[k] * sx, HIF8_SAT));
        r->rows[row] = (float)(1.0 / ((double)sx * l->weight_scale));
    }
    return 2;
}

static const float *w8_ref_rows(void *self) { return ((const w8_ref *)self)->rows; }

enum { W8_LOAD_DIR = 0, W8_REF_HOOK = 1, W8_LOAD_PACKED = 2 };

/* logits of B x T tokens (B * T <= 24) through the export with its Linears on
 * the code packs (the real path; model_load_dir + model_packs_create, or
 * model_load_packed: frozen packs for the rest), or with the reference hook;
 * precision MATMUL_FP32 or MATMUL_BF16 */
static int w8_logits(const char *dir, int precision, int how, int B, int T, float **logits,
                     size_t *n)
{
    llama_model m;
    llama_acts a;
    w8_ref ref;
    qs_diag d = {0};
    int32_t tok[24];
    if (how == W8_LOAD_PACKED ? model_load_packed(&m, dir, precision, &d)
                              : model_load_dir(&m, dir, &d))
        return 1;
    int rc = 0;
    if (how != W8_LOAD_PACKED) {
        m.precision = precision;
        rc = model_packs_create(&m, &d);
    }
    if (how == W8_REF_HOOK) {
        ref.h = m.hif8;
        m.hook.self = &ref;
        m.hook.fn = w8_ref_hook;
        m.hook.planned = w8_ref_planned;
        m.hook.row_scale = w8_ref_rows;
    }
    if (!rc)
        rc = model_acts_init(&a, &m.cfg, B, T, T, 0, &d);
    if (!rc) {
        for (int i = 0; i < B * T; i++)
            tok[i] = (int32_t)((i * 7919 + 13) % m.cfg.vocab_size);
        rc = model_forward(&m, &a, tok, NULL, B, T, 0, &d);
        *n = (size_t)B * T * m.cfg.vocab_size;
        if (!rc && (*logits = qs_malloc(*n * sizeof **logits)))
            memcpy(*logits, a.logits, *n * sizeof **logits);
        else if (!rc)
            rc = QS_ENOMEM;
        model_acts_free(&a);
    }
    if (rc)
        fprintf(stderr, "    %s: %s\n", dir, d.msg);
    model_free(&m);
    return rc;
}

/* the code packs give the bits of the dequantize-then-pack path, fp32 and bf16,
 * loaded either way */
static int w8_code_packs_agree(const char *name, const char *src, const char *flags)
{
    char out[600], args[2048];
    snprintf(out, sizeof out, "%s/w8_pk_%s", test_tmp_dir(), name);
    snprintf(args, sizeof args, "export --format hif8 --model %s --out %s %s", src, out, flags);
    if (w8_cli(args))
        return 1;
    /* 24 rows: the blocked kernels; 3 rows: the few-row ones (decode) */
    static const int shapes[2][2] = {{2, 12}, {1, 3}};
    int bad = 0;
    for (int p = 0; p < 4 && !bad; p++) {
        const int precision = p % 2 ? MATMUL_BF16 : MATMUL_FP32, B = shapes[p / 2][0];
        const int T = shapes[p / 2][1];
        float *y0 = NULL, *y1 = NULL, *y2 = NULL;
        size_t n0 = 0, n1 = 0, n2 = 0;
        bad = w8_logits(out, precision, W8_REF_HOOK, B, T, &y0, &n0) ||
              w8_logits(out, precision, W8_LOAD_DIR, B, T, &y1, &n1) ||
              w8_logits(out, precision, W8_LOAD_PACKED, B, T, &y2, &n2) || n0 != n1 ||
              n0 != n2 || memcmp(y0, y1, n0 * sizeof *y0) != 0 ||
              memcmp(y0, y2, n0 * sizeof *y0) != 0;
        if (bad)
            fprintf(stderr, "    %s: precision %d, %d x %d tokens: logits differ\n", name,
                    precision, B, T);
        qs_free(y0);
        qs_free(y1);
        qs_free(y2);
    }
    return bad;
}

TEST(w8a8, code_packs_equal_dequantize_then_pack_on_demo_and_stories260K)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    ASSERT_EQ_INT(w8_code_packs_agree("demo", "data/demo/model", "--quant-modules 'layers.2-5.*'"),
                  0);
    char dir[512];
    if (!test_shared_path(dir, sizeof dir, "models/stories260K"))
        SKIP("../shared/models/stories260K not present");
    ASSERT_EQ_INT(w8_code_packs_agree("s260k", dir, "--quant-modules '*.mlp.*'"), 0);
}

/* a loaded HiF8 checkpoint holds its quantized weights once, 1 byte each */
TEST(w8a8, quantized_weights_are_held_as_one_byte_codes)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char out[600], args[2048];
    snprintf(out, sizeof out, "%s/w8_bytes", test_tmp_dir());
    snprintf(args, sizeof args, "export --format hif8 --model data/demo/model --out %s "
             "--quant-modules 'layers.1-6.mlp.*'", out);
    ASSERT_EQ_INT(w8_cli(args), 0);
    llama_model m;
    qs_diag d = {0};
    ASSERT_OK(model_load_dir(&m, out, &d), &d);
    m.precision = MATMUL_BF16;
    ASSERT_OK(model_packs_create(&m, &d), &d);
    size_t q = 0, est = 0;   /* weights; 1 byte each + panels padded to 32 columns */
    for (int i = 0; i < m.hif8->n; i++) {
        int down = m.hif8->lin[i].module == MODEL_LIN_DOWN;
        int IN = down ? m.cfg.hidden_dim : m.cfg.dim, O = down ? m.cfg.dim : m.cfg.hidden_dim;
        q += (size_t)IN * O;
        est += matmul_wpack_hif8_bytes_estimate(IN, O);
        ASSERT_TRUE(matmul_wpack_hif8_bytes_estimate(IN, O) <=
                    (size_t)IN * ((O + 31) / 32 * 32) + 256);
    }
    ASSERT_EQ_INT(m.hif8->n, 18);
    size_t b = model_hif8_bytes(m.hif8);
    ASSERT_TRUE(b == est && b >= q);
    for (int i = 0; i < m.hif8->n; i++) {   /* no weight pack of its own, no fp32 room */
        const model_hif8_linear *l = &m.hif8->lin[i];
        const llama_layer_weights *lw = &m.w.layer[l->layer];
        ASSERT_TRUE(m.packs[l->layer * MODEL_LIN_COUNT + l->module] == NULL);
        ASSERT_TRUE((l->module == MODEL_LIN_GATE ? lw->w_gate
                     : l->module == MODEL_LIN_UP ? lw->w_up
                                                 : lw->w_down) == NULL);
    }
    ASSERT_TRUE(m.w.layer[0].w_gate != NULL && m.w.layer[7].w_down != NULL);
    model_free(&m);

    /* the inference load: codes for the quantized Linears, bf16 frozen packs
     * for the other matrices (the export stores them as BF16), no fp32 copy */
    ASSERT_OK(model_load_packed(&m, out, MATMUL_BF16, &d), &d);
    if (!matmul_frozen_available(MATMUL_BF16)) {   /* fp32 block + packs instead */
        model_free(&m);
        SKIP("no packed bf16 format on this CPU");
    }
    ASSERT_TRUE(m.weights_packed && m.hif8 && m.hif8->n == 18 && model_hif8_bytes(m.hif8) == b);
    const llama_config *c = &m.cfg;
    const int QD = c->n_heads * c->head_dim, KD = c->n_kv_heads * c->head_dim;
    const int in_dim[MODEL_LIN_COUNT] = {c->dim, c->dim, c->dim, QD, c->dim, c->dim, c->hidden_dim};
    const int out_dim[MODEL_LIN_COUNT] = {QD, KD, KD, c->dim, c->hidden_dim, c->hidden_dim, c->dim};
    /* tied: one pack for embedding and lm_head; padded: K to even, N to 32 columns */
    size_t other = (size_t)c->vocab_size * c->dim, packed = 0, padded = other, n_packs = 1;
    for (int l = 0; l < c->n_layers; l++)
        for (int k = 0; k < MODEL_LIN_COUNT; k++) {
            struct matmul_wpack *pk = m.packs[l * MODEL_LIN_COUNT + k];
            ASSERT_TRUE((pk == NULL) == model_hif8_planned(&m, l, k));
            if (!pk)
                continue;
            ASSERT_TRUE(matmul_wpack_frozen(pk) && !matmul_wpack_hif8(pk));
            ASSERT_EQ_INT((int)matmul_wpack_bytes(pk),
                          (int)matmul_wpack_frozen_bytes_estimate(in_dim[k], out_dim[k],
                                                                  MATMUL_BF16));
            other += (size_t)in_dim[k] * out_dim[k];
            padded += (size_t)(in_dim[k] + 1) / 2 * 2 * ((out_dim[k] + 31) / 32 * 32);
            packed += matmul_wpack_bytes(pk);
            n_packs++;
        }
    packed += matmul_wpack_bytes(m.packs[c->n_layers * MODEL_LIN_COUNT]);
    /* bf16 pairs (2 bytes per other weight, + panel padding and headers) where
     * the CPU has them; the other packed bf16 format keeps fp32 panels */
    ASSERT_TRUE(packed >= 2 * other);
    if (cpu_level() >= CPU_LEVEL_AVX512BF16)
        ASSERT_TRUE(packed <= 2 * padded + 256 * n_packs);
    ASSERT_TRUE(m.w.layer[0].w_gate == NULL && m.w.wte == NULL);
    ASSERT_TRUE(m.n_params < (size_t)c->n_layers * 4 * c->dim + 4 * c->dim);   /* norms only */
    model_free(&m);
}
