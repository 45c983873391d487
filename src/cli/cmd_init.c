/* cmd_init.c: qatscope init — a random-initialised Hugging Face checkpoint.
 *
 *   qatscope init --config CONFIG.json (--tokenizer FILE | --tokenizer-dir DIR) --out DIR
 *                 [--seed S] [--dtype bf16|f32] [--max-shard-size BYTES]
 *
 * Everything is validated before anything is written: the config with the
 * real parser (hfconfig), the tokenizer by loading it (its vocabulary may be
 * smaller than the model's, not larger), --out absent or an empty directory.
 * The checkpoint is then built in OUT.tmp.<pid> (config.json with torch_dtype
 * set, the tokenizer file(s), the weights: include/qs/hfinit.h) and renamed to
 * OUT at the end; on any error the temp directory is removed, so OUT either
 * is complete or does not exist.  Errors are one line, exit 2.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "qs/fileio.h"
#include "qs/hfinit.h"
#include "qs/interrupt.h"
#include "qs/mem.h"
#include "qs/safetensors.h"
#include "qs/tokenizer.h"

static const char USAGE[] =
    "usage: qatscope init --config CONFIG.json (--tokenizer FILE | --tokenizer-dir DIR) --out DIR\n"
    "                     [--seed S] [--dtype bf16|f32] [--max-shard-size BYTES]\n"
    "\n"
    "Writes a random-initialised Hugging Face checkpoint of CONFIG's architecture into DIR\n"
    "(which must not exist or be empty): config.json (torch_dtype set), the tokenizer, and\n"
    "model.safetensors (or model-0000i-of-0000n.safetensors + model.safetensors.index.json\n"
    "when the weights exceed --max-shard-size, default 5000000000 as save_pretrained).\n"
    "Weights ~ N(0, 0.02^2); o_proj and down_proj ~ N(0, (0.02/sqrt(2*num_hidden_layers))^2);\n"
    "RMSNorm weights 1; biases 0.  Deterministic in --seed (default 0), whatever the thread\n"
    "count; --dtype bf16 (default) stores the round-to-nearest-even of the f32 values.\n"
    "  --tokenizer FILE     copy one tokenizer.json or tokenizer.model\n"
    "  --tokenizer-dir DIR  copy tokenizer.json, tokenizer.model, tokenizer_config.json,\n"
    "                       special_tokens_map.json, generation_config.json found in DIR\n";

typedef struct init_args {
    const char *config, *tok_file, *tok_dir, *out;
    long seed;
    int dtype;
    long max_shard;
} init_args;

/* 1 if path is an existing non-empty directory or exists and is not a directory */
static int init_out_taken(const char *path)
{
    if (!fileio_exists(path))
        return 0;
    if (!fileio_is_dir(path))
        return 1;
    DIR *dp = opendir(path);
    if (!dp)
        return 1;
    struct dirent *e;
    int taken = 0;
    while (!taken && (e = readdir(dp)))
        taken = strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(dp);
    return taken;
}

static int init_copy(const char *src, const char *dir, const char *name, qs_diag *d)
{
    char dst[4400];
    if (fileio_join(dst, sizeof dst, dir, name))
        return diag_set(d, QS_ERANGE, dir, -1, "path too long");
    return fileio_copy(src, dst, d);
}

/* config.json, the tokenizer files, then the weights, all into tmp. */
static int init_fill(const init_args *a, const llama_config *c, const char *cfg_text, size_t cfg_n,
                     const char *tok_name, const char *tmp, hfinit_summary *s, qs_diag *d)
{
    char path[4400];
    int rc = fileio_join(path, sizeof path, tmp, "config.json")
                 ? diag_set(d, QS_ERANGE, tmp, -1, "path too long")
                 : fileio_write_atomic(path, cfg_text, cfg_n, d);
    if (rc)
        return rc;
    rc = a->tok_file ? init_copy(a->tok_file, tmp, tok_name, d)
                     : model_hf_files_copy(a->tok_dir, tmp, 0, d);
    if (rc)
        return rc;
    hfinit_opts o = {(uint64_t)a->seed, a->dtype, (uint64_t)a->max_shard};
    return hfinit_weights_write(c, tmp, &o, s, d);
}

/* Config and tokenizer checked; *tok_name: the file name --tokenizer FILE gets. */
static int init_validate(const init_args *a, llama_config *c, char **cfg_out, size_t *cfg_n,
                         const char **tok_name, qs_diag *d)
{
    char cfg_path[4400];
    if (fileio_is_dir(a->config)) {
        if (fileio_join(cfg_path, sizeof cfg_path, a->config, "config.json"))
            return diag_set(d, QS_ERANGE, a->config, -1, "path too long");
    } else {
        snprintf(cfg_path, sizeof cfg_path, "%s", a->config);
    }
    char *text;
    size_t n;
    int rc = fileio_read_all(cfg_path, &text, &n, d);
    if (rc)
        return rc;
    if (!(rc = hfconfig_parse(c, text, n, cfg_path, d)))
        rc = hfinit_config_text(text, n, hfinit_torch_dtype(a->dtype), cfg_out, cfg_n, cfg_path,
                                d);
    qs_free(text);
    if (rc)
        return rc;
    const char *tp = a->tok_file ? a->tok_file : a->tok_dir;
    if (a->tok_file && fileio_is_dir(a->tok_file))
        return diag_set(d, QS_EINVAL, tp, -1,
                        "--tokenizer expects a tokenizer.json or tokenizer.model file (use "
                        "--tokenizer-dir for a directory)");
    if (a->tok_dir && !fileio_is_dir(a->tok_dir))
        return diag_set(d, QS_ENOTFOUND, tp, -1, "--tokenizer-dir: no such directory");
    tokenizer *tok = NULL;
    if ((rc = tokenizer_create(&tok, tp, d)))
        return rc;
    int tv = tokenizer_vocab_size(tok);
    *tok_name = !strcmp(tokenizer_kind(tok), "spm-model") ? "tokenizer.model" : "tokenizer.json";
    tokenizer_destroy(tok);
    if (tv > c->vocab_size)
        return diag_set(d, QS_ERANGE, tp, -1,
                        "tokenizer has %d tokens, more than the config's vocab_size %d", tv,
                        c->vocab_size);
    return 0;
}

static int init_run(const init_args *a)
{
    qs_diag d = {0};
    llama_config c;
    char *cfg_text = NULL;
    size_t cfg_n = 0;
    const char *tok_name = NULL;
    if (init_validate(a, &c, &cfg_text, &cfg_n, &tok_name, &d)) {
        qs_free(cfg_text);
        return cli_diag_error(&d);
    }
    char out[4096], tmp[4200];
    snprintf(out, sizeof out, "%s", a->out);
    for (size_t n = strlen(out); n > 1 && out[n - 1] == '/'; n--)
        out[n - 1] = 0;
    int rc = 0;
    if (init_out_taken(out)) {
        qs_free(cfg_text);
        struct stat st;   /* a file was called "not an empty directory" */
        int is_file = !stat(out, &st) && S_ISREG(st.st_mode), is_dir = fileio_is_dir(out);
        return cli_error("%s: exists and is %s (init never overwrites)", out,
                         is_dir ? "not an empty directory" : is_file ? "a file, not a directory"
                                                                     : "not a directory");
    }
    /* Ctrl-C / SIGTERM: the writer stops, the temporary directory is removed,
     * then the process ends by the signal (qs/interrupt.h) */
    interrupt_catch();
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)getpid());
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", out);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = 0;
        rc = fileio_mkdir_p(parent, &d);
    }
    if (!rc && mkdir(tmp, 0777) != 0)
        rc = diag_set(&d, QS_EIO, tmp, -1, "cannot create the temporary directory: %s",
                      strerror(errno));
    if (rc) {
        qs_free(cfg_text);
        return cli_diag_error(&d);
    }
    hfinit_summary s;
    rc = init_fill(a, &c, cfg_text, cfg_n, tok_name, tmp, &s, &d);
    qs_free(cfg_text);
    if (!rc && init_out_taken(out))
        rc = diag_set(&d, QS_EIO, out, -1, "appeared while init ran; the result is not moved");
    if (!rc && rename(tmp, out) != 0)
        rc = diag_set(&d, QS_EIO, out, -1, "cannot rename %s to it", tmp);
    if (rc) {
        fileio_dir_remove_flat(tmp);
        diag_rebase(&d, tmp, out);   /* name OUT/x, not OUT.tmp.<pid>/x */
        rc = cli_diag_error(&d);
        interrupt_exit();
        return rc;
    }
    printf("init: %s: %s, %zu parameters in %d tensors, %s, seed %ld, %d safetensors file%s "
           "(%llu bytes of tensor data)\n",
           out, c.arch_name, s.n_params, s.n_tensors, safetensors_dtype_name(a->dtype), a->seed,
           s.n_files, s.n_files == 1 ? "" : "s", (unsigned long long)s.total_bytes);
    return fflush(stdout) ? CLI_EXIT_USAGE : 0;   /* main() names a failed write */
}

int cmd_init(int argc, char **argv)
{
    init_args a = {0};
    a.dtype = SAFETENSORS_BF16;
    const char *v;
    int rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            fputs(USAGE, stdout);
            return 0;
        }
        static const char *const flags[] = {"--config", "--tokenizer", "--tokenizer-dir", "--out",
                                            "--seed", "--dtype", "--max-shard-size"};
        int k = -1;
        for (int j = 0; j < (int)(sizeof flags / sizeof *flags) && k < 0; j++)
            if (cli_flag_is(f, flags[j]))
                k = j;
        if (k < 0)
            return cli_error("init: unexpected argument '%s' (argument %d); run 'qatscope init "
                             "--help'",
                             f, i);
        if (!(v = cli_flag_value(argc, argv, &i)))
            return CLI_EXIT_USAGE;
        switch (k) {
        case 0: a.config = v; break;
        case 1: a.tok_file = v; break;
        case 2: a.tok_dir = v; break;
        case 3: a.out = v; break;
        case 4: rc = cli_parse_long("--seed", v, 0, LONG_MAX, &a.seed); break;
        case 5:
            if (!strcmp(v, "bf16"))
                a.dtype = SAFETENSORS_BF16;
            else if (!strcmp(v, "f32"))
                a.dtype = SAFETENSORS_F32;
            else
                rc = cli_error("--dtype: expected bf16 or f32, got '%s'", v);
            break;
        default:
            rc = cli_parse_long("--max-shard-size", v, 1, LONG_MAX, &a.max_shard);
            break;
        }
    }
    if (rc)
        return rc;
    if (!a.config)
        return cli_error("init: missing --config CONFIG.json; run 'qatscope init --help'");
    if (!a.tok_file == !a.tok_dir)
        return cli_error("init: give exactly one of --tokenizer FILE and --tokenizer-dir DIR");
    if (!a.out)
        return cli_error("init: missing --out DIR; run 'qatscope init --help'");
    return init_run(&a);
}
