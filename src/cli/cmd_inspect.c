/* cmd_inspect.c: qatscope inspect — describe a model directory without
 * loading its weights: architecture, shapes, parameters by group, storage
 * dtypes, tokenizer, and the memory formula for inference and training.
 *
 *   qatscope inspect DIR [--batch B] [--seq T]     (training estimate for B x T, default 8 x 512)
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/safetensors.h"
#include "qs/tokenizer.h"

static const char USAGE[] = "usage: qatscope inspect DIR [--batch B] [--seq T]\n";

static const char *const arch_names[] = {"llama", "mistral", "qwen2", "pangu-embedded"};

static double mib(size_t b) { return b / (1024.0 * 1024.0); }

static void inspect_print_count(const char *name, size_t n, size_t total)
{
    printf("  %-10s %14zu  (%5.1f%%)\n", name, n, total ? 100.0 * n / total : 0.0);
}

/* dtypes of the expected tensors and how many are missing */
static int inspect_dtypes(const llama_config *c, const char *dir, char *buf, size_t n,
                          int *missing, qs_diag *d)
{
    safetensors_dir sd;
    int rc = safetensors_dir_open(&sd, dir, d);
    if (rc)
        return rc;
    model_tensor *t;
    int nt;
    if (model_table_create(c, &t, &nt)) {
        safetensors_dir_close(&sd);
        return diag_set(d, QS_ENOMEM, dir, -1, "out of memory");
    }
    size_t per[SAFETENSORS_DTYPE_COUNT] = {0};
    *missing = 0;
    for (int i = 0; i < nt; i++) {
        const safetensors_tensor *st = safetensors_dir_find(&sd, t[i].name, NULL);
        if (st)
            per[st->dtype] += st->n_elems;
        else
            (*missing)++;
    }
    buf[0] = 0;
    for (int k = 0; k < SAFETENSORS_DTYPE_COUNT; k++)
        if (per[k]) {
            size_t w = strlen(buf);
            snprintf(buf + w, n - w, "%s%s (%zu elements)", w ? ", " : "",
                     safetensors_dtype_name(k), per[k]);
        }
    printf("weights:      %d file%s\n", sd.n_files, sd.n_files == 1 ? "" : "s");
    qs_free(t);
    safetensors_dir_close(&sd);
    return 0;
}

static int inspect_run(const char *dir, long B, long T)
{
    qs_diag d = {0};
    llama_config c;
    if (hfconfig_load(&c, dir, &d))
        return cli_diag_error(&d);
    int ctx = hfconfig_max_context(&c);
    printf("model:        %s\n", dir);
    printf("architecture: %s (%s)\n", c.arch_name, arch_names[c.arch]);
    printf("shape:        %d layers, hidden %d, intermediate %d, %d heads (%d kv, head_dim %d), "
           "vocab %d\n",
           c.n_layers, c.dim, c.hidden_dim, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size);
    printf("context:      %d%s, rope_theta %g%s, rms_norm_eps %g\n", ctx,
           c.sliding_window ? " (sliding_window)" : "", c.rope_theta,
           c.rope_scale.type == ROPE_SCALING_LLAMA3   ? ", llama3 scaling"
           : c.rope_scale.type == ROPE_SCALING_LINEAR ? ", linear scaling"
                                                      : "",
           c.norm_eps);
    printf("biases:       q/k/v %s, o %s; lm_head %s\n", c.qkv_bias ? "yes" : "no",
           c.o_bias ? "yes" : "no", c.tied ? "tied to embed_tokens" : "separate");
    model_param_groups g;
    if (model_param_groups_count(&c, &g))
        return cli_error("inspect: out of memory");
    printf("parameters:   %zu\n", g.total);
    inspect_print_count("embedding", g.embed, g.total);
    inspect_print_count("attention", g.attn, g.total);
    inspect_print_count("mlp", g.mlp, g.total);
    inspect_print_count("norms", g.norms, g.total);
    if (!c.tied)
        inspect_print_count("lm_head", g.lm_head, g.total);
    char dt[256];
    int missing = 0;
    if (inspect_dtypes(&c, dir, dt, sizeof dt, &missing, &d))
        return cli_diag_error(&d);
    printf("dtypes:       %s%s\n", dt[0] ? dt : "none",
           missing ? " (some expected tensors missing: the loader will refuse)" : "");
    tokenizer *tok = NULL;
    if (tokenizer_create(&tok, dir, &d) == 0) {
        printf("tokenizer:    %s, vocab %d, bos %d, eos %d\n", tokenizer_kind(tok),
               tokenizer_vocab_size(tok), (int)tokenizer_bos_id(tok), (int)tokenizer_eos_id(tok));
        tokenizer_destroy(tok);
    } else {
        char line[QS_DIAG_MSG_MAX + QS_DIAG_PATH_MAX + 8];
        diag_format(&d, line, sizeof line);
        printf("tokenizer:    none usable (%s)\n", line);
    }
    if (T > ctx)
        T = ctx;
    model_memory mm;
    model_memory_estimate(&c, (int)B, (int)T, ctx, &mm);
    printf("memory (fp32 engine, MiB; see model_memory_estimate):\n");
    printf("  inference, 1 x %d tokens: %.1f = params %.1f + activations/KV %.1f + rope %.1f\n",
           ctx, mib(mm.infer_bytes), mib(mm.params_bytes), mib(mm.acts_infer_bytes),
           mib(mm.rope_bytes));
    printf("  training, %ld x %ld tokens: %.1f = params %.1f + grads %.1f + adam m,v %.1f + "
           "activations %.1f + rope %.1f\n",
           B, T, mib(mm.train_bytes), mib(mm.params_bytes), mib(mm.grads_bytes),
           mib(mm.adam_bytes), mib(mm.acts_train_bytes), mib(mm.rope_bytes));
    return fflush(stdout) ? cli_error("error writing stdout") : 0;
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
            rc = cli_error("inspect: unexpected argument '%s' (argument %d)\n%s", a, i, USAGE);
        }
    }
    if (rc)
        return rc;
    if (!dir)
        return cli_error("inspect: missing DIR\n%s", USAGE);
    return inspect_run(dir, B, T);
}
