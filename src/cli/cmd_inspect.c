/* cmd_inspect.c: qatscope inspect — describe a model directory without
 * loading its weights: architecture, shapes, parameters by group, storage
 * dtypes, tokenizer, and the memory formula for inference and training: the
 * fp32 engine's, and that of eval / ppl / generate, whose weights live only in
 * packs in the precision of the forwards (model_packed_memory_estimate) and
 * whose arenas follow their inputs.
 * Everything is gathered and validated first (config, every safetensors
 * header, every expected tensor's shape, train_state.bin if present), then
 * printed: a bad directory gives
 * one error line on stderr, exit 2, and nothing on stdout.
 *
 *   qatscope inspect DIR [--batch B] [--seq T]     (training estimate for B x T, default 8 x 512)
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "qs/evalquant.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_hif8.h"
#include "qs/model_infer.h"
#include "qs/safetensors.h"
#include "qs/tokenizer.h"

static const char USAGE[] = "usage: qatscope inspect DIR [--batch B] [--seq T]\n";

static const char *const arch_names[] = {"llama", "mistral", "qwen2", "pangu-embedded"};

/* The packed-inference arenas inspect prints: a generate of up to
 * INSPECT_GEN_POSITIONS, eval requests of up to INSPECT_EVAL_SHORT and
 * INSPECT_EVAL_LONG tokens with answers of up to INSPECT_EVAL_CONT (all capped at
 * the model's context; the long ones few-shot prompts sharing their examples). */
enum {
    INSPECT_GEN_POSITIONS = 2048,
    INSPECT_EVAL_SHORT = 512,
    INSPECT_EVAL_LONG = 2048,
    INSPECT_EVAL_CONT = 32,
};

static double mib(size_t b) { return b / (1024.0 * 1024.0); }

static void inspect_print_count(const char *name, size_t n, size_t total)
{
    printf("  %-10s %14zu  (%5.1f%%)\n", name, n, total ? 100.0 * n / total : 0.0);
}

/* Everything inspect prints, gathered (and validated) before the first line
 * goes out, so a bad directory yields one error line and no partial report. */
typedef struct inspect_info {
    llama_config c;
    int ctx;
    model_param_groups g;
    int n_files;
    char dtypes[256];     /* "F32 (n elements), BF16 (...)" */
    int missing;          /* expected tensors absent from every shard */
    char first_missing[96];   /* the first of them */
    char tokenizer[QS_DIAG_MSG_MAX + QS_DIAG_PATH_MAX + 64];
    int has_state;        /* train_state.bin present (a run checkpoint) */
    long state_step;
    int state_hist;       /* amax histories in it */
    model_memory mm;
    long B, T;
    int matrices_bf16;    /* every stored weight matrix (codes aside) is BF16 */
    model_packed_memory pm_bf16, pm_fp32; /* model_load_packed's weights */
    size_t kv_position;   /* KV cache bytes per position (every layer) */
    int gen_positions, ppl_window, eval_short, eval_long;
    size_t gen_acts, gen_kv, ppl_acts, eval_short_acts, eval_long_acts;   /* bytes */
} inspect_info;

static void inspect_shape_format(char *buf, size_t n, int ndim, const int64_t *shape)
{
    snprintf(buf, n, "[");
    for (int k = 0; k < ndim; k++)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%lld", k ? ", " : "", (long long)shape[k]);
    snprintf(buf + strlen(buf), n - strlen(buf), "]");
}

/* 1 when q8 (NULL: not a HiF8 checkpoint) stores tensor `name` as HiF8 codes */
static int inspect_coded(const model_hif8 *q8, const char *name)
{
    char mod[96];
    for (int k = 0; q8 && k < q8->n; k++) {
        model_hif8_module_name(mod, sizeof mod, q8->lin[k].layer, q8->lin[k].module);
        size_t n = strlen(mod);
        if (!strncmp(name, mod, n) && !strcmp(name + n, ".weight"))
            return 1;
    }
    return 0;
}

/* Every shard's header (safetensors_dir_open validates them all) and the
 * shape and dtype of every expected tensor present, as the loader checks them
 * (a HiF8 checkpoint's coded weights: U8 with their scale tensors, q8);
 * dtypes and missing tensors counted.  Values are not read (inspect does not
 * load the weights). */
static int inspect_weights(inspect_info *in, const char *dir, const model_hif8 *q8, qs_diag *d)
{
    safetensors_dir sd;
    int rc = safetensors_dir_open(&sd, dir, d);
    if (rc)
        return rc;
    model_tensor *t;
    int nt;
    if (model_table_create(&in->c, &t, &nt)) {
        safetensors_dir_close(&sd);
        return diag_set(d, QS_ENOMEM, dir, -1, "out of memory");
    }
    size_t per[SAFETENSORS_DTYPE_COUNT] = {0};
    in->missing = 0;
    in->matrices_bf16 = 1;
    for (int i = 0; i < nt && !rc; i++) {
        const char *file = NULL;
        const safetensors_tensor *st = safetensors_dir_find(&sd, t[i].name, &file);
        if (!st) {
            if (!in->missing++)
                snprintf(in->first_missing, sizeof in->first_missing, "%s", t[i].name);
            continue;
        }
        if (st->ndim != t[i].ndim || st->shape[0] != t[i].shape[0] ||
            (t[i].ndim == 2 && st->shape[1] != t[i].shape[1])) {
            char want[64], found[128];
            inspect_shape_format(want, sizeof want, t[i].ndim, t[i].shape);
            inspect_shape_format(found, sizeof found, st->ndim, st->shape);
            rc = diag_set(d, QS_ESHAPE, file, -1, "tensor '%s': expected %s, found %s", t[i].name,
                          want, found);
        } else if (inspect_coded(q8, t[i].name)) {   /* its code pack */
            char scale[sizeof t[i].name + 8];
            snprintf(scale, sizeof scale, "%s_scale", t[i].name);
            rc = model_hif8_check_stored(st, safetensors_dir_find(&sd, scale, NULL),
                                         t[i].shape[0], t[i].shape[1], file, d);
        } else if (st->dtype != SAFETENSORS_F32 && st->dtype != SAFETENSORS_BF16 &&
                   st->dtype != SAFETENSORS_F16) {   /* safetensors_tensor_to_f32's refusal */
            rc = diag_set(d, QS_EUNSUPPORTED, file, -1,
                          "tensor '%s': dtype %s, expected F32, BF16 or F16", t[i].name,
                          safetensors_dtype_name(st->dtype));
        } else if (t[i].ndim == 2 && st->dtype != SAFETENSORS_BF16) {
            in->matrices_bf16 = 0;   /* the weight matrices go into packs: bf16 ones from BF16 */
        }
        per[st->dtype] += st->n_elems;
    }
    in->n_files = sd.n_files;
    in->dtypes[0] = 0;
    for (int k = 0; k < SAFETENSORS_DTYPE_COUNT; k++)
        if (per[k]) {
            size_t w = strlen(in->dtypes);
            snprintf(in->dtypes + w, sizeof in->dtypes - w, "%s%s (%zu elements)", w ? ", " : "",
                     safetensors_dtype_name(k), per[k]);
        }
    qs_free(t);
    safetensors_dir_close(&sd);
    return rc;
}

/* bytes of n floats; QS_ERANGE past size_t */
static int inspect_floats(size_t n, size_t *bytes)
{
    *bytes = n > SIZE_MAX / sizeof(float) ? SIZE_MAX : n * sizeof(float);
    return *bytes == SIZE_MAX ? QS_ERANGE : 0;
}

/* eval / ppl / generate: the weights as model_load_packed holds them (q8: the
 * checkpoint's quantization_config, or NULL) and the arenas of those commands. */
static int inspect_packed(inspect_info *in, const model_hif8 *q8, const char *dir, qs_diag *d)
{
    const llama_config *c = &in->c;
    int rc = model_packed_memory_estimate(c, MATMUL_BF16, q8, in->matrices_bf16, &in->pm_bf16);
    if (!rc)
        rc = model_packed_memory_estimate(c, MATMUL_FP32, q8, in->matrices_bf16, &in->pm_fp32);
    if (rc == QS_ENOMEM)
        return diag_set(d, rc, dir, -1, "out of memory");
    in->gen_positions = in->ctx < INSPECT_GEN_POSITIONS ? in->ctx : INSPECT_GEN_POSITIONS;
    int prompt = in->gen_positions < MODEL_GENERATE_CHUNK ? in->gen_positions : MODEL_GENERATE_CHUNK;
    in->ppl_window = model_ppl_window_default(c);
    in->eval_short = in->ctx < INSPECT_EVAL_SHORT ? in->ctx : INSPECT_EVAL_SHORT;
    in->eval_long = in->ctx < INSPECT_EVAL_LONG ? in->ctx : INSPECT_EVAL_LONG;
    if (!rc)
        rc = inspect_floats(model_acts_kv_elems(c, 1, 0), &in->kv_position);
    if (!rc)
        rc = inspect_floats(model_acts_kv_elems(c, (size_t)in->gen_positions, 0), &in->gen_kv);
    if (!rc)
        rc = inspect_floats(model_generate_acts_elems(c, prompt, in->gen_positions - prompt),
                            &in->gen_acts);
    if (!rc)
        rc = inspect_floats(model_ppl_acts_elems(c, in->ppl_window), &in->ppl_acts);
    if (!rc)
        rc = inspect_floats(model_lm_acts_elems(c, in->eval_short, INSPECT_EVAL_CONT, 0),
                            &in->eval_short_acts);
    if (!rc)
        rc = inspect_floats(model_lm_acts_elems(c, in->eval_long, INSPECT_EVAL_CONT,
                                                in->eval_long - 2),
                            &in->eval_long_acts);
    if (rc)
        return diag_set(d, QS_ERANGE, dir, -1, "the packed inference memory estimate does not "
                        "fit in 64 bits");
    return 0;
}

static int inspect_collect(inspect_info *in, const char *dir, qs_diag *d)
{
    int rc = hfconfig_load(&in->c, dir, d);
    if (rc)
        return rc;
    in->ctx = hfconfig_max_context(&in->c);
    if (model_param_groups_count(&in->c, &in->g))
        return diag_set(d, QS_ENOMEM, dir, -1, "out of memory");
    model_hif8 *q8 = NULL;   /* a HiF8 checkpoint's quantization_config, validated */
    if ((rc = model_hif8_config_read(dir, &in->c, &q8, d)) < 0)
        return rc;
    rc = inspect_weights(in, dir, q8, d);
    if (!rc)
        rc = inspect_packed(in, q8, dir, d);
    model_hif8_free(q8);
    if (rc)
        return rc;
    if ((rc = evalquant_state_info(dir, &in->state_step, &in->state_hist, d)) < 0)
        return rc;
    in->has_state = rc;
    /* an unusable tokenizer is reported, not fatal: the weights can still be described */
    tokenizer *tok = NULL;
    qs_diag td = {0};
    if (tokenizer_create(&tok, dir, &td) == 0) {
        snprintf(in->tokenizer, sizeof in->tokenizer, "%s, vocab %d, bos %d, eos %d",
                 tokenizer_kind(tok), tokenizer_vocab_size(tok), (int)tokenizer_bos_id(tok),
                 (int)tokenizer_eos_id(tok));
        tokenizer_destroy(tok);
    } else {
        char line[QS_DIAG_MSG_MAX + QS_DIAG_PATH_MAX + 8];
        diag_format(&td, line, sizeof line);
        snprintf(in->tokenizer, sizeof in->tokenizer, "none usable (%s)", line);
    }
    if (in->T > in->ctx)
        in->T = in->ctx;
    /* a figure past 2^64 bytes is refused, not printed wrapped round */
    if (model_memory_estimate(&in->c, 1, 1, in->ctx, &in->mm))
        return diag_set(d, QS_ERANGE, dir, -1, "the memory estimate at the model's context of %d "
                        "tokens does not fit in 64 bits", in->ctx);
    if (model_memory_estimate(&in->c, (int)in->B, (int)in->T, in->ctx, &in->mm))
        return diag_set(d, QS_ERANGE, dir, -1, "the training memory estimate for --batch %ld x "
                        "--seq %ld does not fit in 64 bits (over 16 EiB); lower --batch or --seq",
                        in->B, in->T);
    return 0;
}

static void inspect_print_packed(const inspect_info *in)
{
    const model_packed_memory *pm = &in->pm_bf16;
    printf("memory (packed inference: eval / ppl / generate on this CPU, MiB; see "
           "model_packed_memory_estimate):\n");
    printf("  weights, --precision bf16: %.1f = packs %.1f", mib(pm->bytes), mib(pm->packs_bytes));
    if (pm->codes_bytes)
        printf(" + HiF8 codes %.1f", mib(pm->codes_bytes));
    printf(" + %s %.1f + rope %.1f   (--precision fp32: %.1f)\n",
           pm->fp32_copy ? "fp32 copy of the weights" : "fp32 norms/biases",
           mib(pm->params_bytes), mib(pm->rope_bytes), mib(in->pm_fp32.bytes));
    printf("  activations, generate: %.1f for %d positions (KV cache %.1f: %.1f KiB per "
           "position); ppl, window %d: %.1f\n",
           mib(in->gen_acts), in->gen_positions, mib(in->gen_kv), in->kv_position / 1024.0,
           in->ppl_window, mib(in->ppl_acts));
    printf("  activations, eval: %.1f for requests of up to %d tokens", mib(in->eval_short_acts),
           in->eval_short);
    if (in->eval_long > in->eval_short)
        printf(", %.1f up to %d with a few-shot prefix shared by items", mib(in->eval_long_acts),
               in->eval_long);
    printf(" (answers of up to %d)\n", INSPECT_EVAL_CONT);
    printf("  not counted: the matmul workspace, the tokenizer, eval's tasks, the C runtime, "
           "thread stacks, huge-page rounding (README)\n");
}

static void inspect_print(const inspect_info *in, const char *dir)
{
    const llama_config *c = &in->c;
    const model_param_groups *g = &in->g;
    printf("model:        %s\n", dir);
    printf("architecture: %s (%s)\n", c->arch_name, arch_names[c->arch]);
    printf("shape:        %d layers, hidden %d, intermediate %d, %d heads (%d kv, head_dim %d), "
           "vocab %d\n",
           c->n_layers, c->dim, c->hidden_dim, c->n_heads, c->n_kv_heads, c->head_dim,
           c->vocab_size);
    printf("context:      %d%s, rope_theta %g%s, rms_norm_eps %g\n", in->ctx,
           c->sliding_window ? " (sliding_window)" : "", c->rope_theta,
           c->rope_scale.type == ROPE_SCALING_LLAMA3   ? ", llama3 scaling"
           : c->rope_scale.type == ROPE_SCALING_LINEAR ? ", linear scaling"
                                                       : "",
           c->norm_eps);
    printf("biases:       q/k/v %s, o %s; lm_head %s\n", c->qkv_bias ? "yes" : "no",
           c->o_bias ? "yes" : "no", c->tied ? "tied to embed_tokens" : "separate");
    printf("parameters:   %zu\n", g->total);
    inspect_print_count("embedding", g->embed, g->total);
    inspect_print_count("attention", g->attn, g->total);
    inspect_print_count("mlp", g->mlp, g->total);
    inspect_print_count("norms", g->norms, g->total);
    if (!c->tied)
        inspect_print_count("lm_head", g->lm_head, g->total);
    printf("weights:      %d file%s\n", in->n_files, in->n_files == 1 ? "" : "s");
    printf("dtypes:       %s\n", in->dtypes[0] ? in->dtypes : "none");
    if (in->missing)
        printf("missing:      %d expected tensor%s, the first '%s': the loader will refuse this "
               "checkpoint\n", in->missing, in->missing == 1 ? "" : "s", in->first_missing);
    printf("tokenizer:    %s\n", in->tokenizer);
    if (in->has_state)
        printf("train state:  step %ld, %d amax histories (eval --precision hif8 defaults to %s "
               "scaling)\n",
               in->state_step, in->state_hist, in->state_hist ? "delayed" : "current");
    const model_memory *mm = &in->mm;
    printf("memory (fp32 engine, MiB; see model_memory_estimate):\n");
    printf("  inference, 1 x %d tokens: %.1f = params %.1f + activations/KV %.1f + rope %.1f\n",
           in->ctx, mib(mm->infer_bytes), mib(mm->params_bytes), mib(mm->acts_infer_bytes),
           mib(mm->rope_bytes));
    printf("  training, %ld x %ld tokens: %.1f = params %.1f + grads %.1f + adam m,v %.1f + "
           "activations %.1f + rope %.1f\n",
           in->B, in->T, mib(mm->train_bytes), mib(mm->params_bytes), mib(mm->grads_bytes),
           mib(mm->adam_bytes), mib(mm->acts_train_bytes), mib(mm->rope_bytes));
    printf("  training with recompute: %.1f (activations %.1f); train adds the backward "
           "scratch, quantized operands and packs (its header line)\n",
           mib(mm->train_recompute_bytes), mib(mm->acts_recompute_bytes));
    inspect_print_packed(in);
}

static int inspect_run(const char *dir, long B, long T)
{
    qs_diag d = {0};
    inspect_info in;
    memset(&in, 0, sizeof in);
    in.B = B;
    in.T = T;
    if (inspect_collect(&in, dir, &d))
        return cli_diag_error(&d);
    inspect_print(&in, dir);
    return fflush(stdout) ? CLI_EXIT_USAGE : 0;   /* main() names a failed write */
}

int cmd_inspect(int argc, char **argv)
{
    const char *dir = NULL, *v;
    long B = 8, T = 512;
    int rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(USAGE, stdout);
            return 0;
        } else if (cli_flag_is(a, "--batch") || cli_flag_is(a, "--seq")) {
            if (!(v = cli_flag_value(argc, argv, &i)))
                return CLI_EXIT_USAGE;
            rc = cli_flag_is(a, "--batch") ? cli_parse_long("--batch", v, 1, 1 << 20, &B)
                                           : cli_parse_long("--seq", v, 1, 1 << 24, &T);
        } else if (a[0] != '-' && !dir) {
            dir = a;
        } else {
            rc = cli_error("inspect: unexpected argument '%s' (argument %d); run 'qatscope inspect "
                           "--help'", a, i);
        }
    }
    if (rc)
        return rc;
    if (!dir)
        return cli_error("inspect: missing DIR; run 'qatscope inspect --help'");
    return inspect_run(dir, B, T);
}
