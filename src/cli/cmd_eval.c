/* cmd_eval.c: qatscope eval - MMLU / HellaSwag / ARC scored like
 * lm-evaluation-harness, written as a harness-layout results.json.
 *
 *   qatscope eval --model DIR --tasks mmlu,hellaswag,arc_easy,arc_challenge
 *                 --data-dir DIR --output results.json [--shots K]
 *                 [--limit N | --subset N --subset-seed S] [--precision fp32|bf16|bf16-amx|hif8|hif8-fp32]
 *                 [--quant-modules PATTERNS] [--quant-scaling current|delayed|auto]
 *                 [--threads N] [--bos | --no-bos] [--log-samples F.jsonl.zst]
 *                 [--tasks-dir DIR] [--batch N] [--max-length N]
 *
 * Progress (items/s, ETA) goes to stderr only when stderr is a terminal; the
 * summary table goes to stdout at the end.  --output and --log-samples are checked
 * before any scoring (missing parent directories are created) and are published
 * together: both are written under temp names and renamed only when both were.
 * Under mpirun (a `make MPI=1`
 * build) the items are split over the ranks and rank 0 alone writes and
 * prints; the files equal the one-process files (eval_dist.c).
 *
 * The weights are loaded for inference (model_load_packed: packed once, in the
 * precision of the matmuls; hif8's fake-quantized weights once too) and the
 * model hash (model_sha256) is computed on a background thread that starts
 * after the load (whose threads it would slow down) and is collected when
 * results.json is written: it runs while the items are tokenized on one
 * thread and then alongside the scoring.  Only the rank that writes hashes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli.h"
#include "cli_model.h"
#include "qs/digest.h"
#include "qs/dist.h"
#include "qs/eval.h"
#include "qs/evalquant.h"
#include "qs/fileio.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_hif8.h"
#include "qs/model_infer.h"
#include "qs/qplan.h"
#include "qs/results.h"
#include "qs/tokenizer.h"

#define EVAL_MAX_TASKS 16

static const char eval_usage[] =
    "usage: qatscope eval --model DIR --tasks LIST --data-dir DIR --output results.json\n"
    "         [--shots K] [--limit N | --subset N --subset-seed S]\n"
    "         [--precision fp32|bf16|bf16-amx|hif8|hif8-fp32] [--quant-modules PATTERNS]\n"
    "         [--quant-scaling current|delayed|auto]\n"
    "         [--threads N] [--bos | --no-bos] [--log-samples samples.jsonl.zst]\n"
    "         [--tasks-dir DIR] [--batch N] [--max-length N]\n"
    "tasks: mmlu, hellaswag, arc_easy, arc_challenge (files in the tasks dir)\n"
    "data dir: mmlu/{test,dev}/<subject>_{test,dev}.csv, hellaswag/hellaswag_val.jsonl or\n"
    "  hellaswag/hellaswag_val_full.txt (llama.cpp), arc/{hf_layout,ai2_layout}/ARC-*.jsonl\n"
    "  (any file may be .zst); see README '### eval'.\n";

static int eval_encode_cb(void *self, const char *text, size_t len, int add_bos, int32_t **ids,
                          size_t *n_ids, qs_diag *d)
{
    return tokenizer_encode(self, text, len, add_bos, ids, n_ids, d);
}

typedef struct eval_progress {
    struct timespec t0;
    int tty;
} eval_progress;

static double eval_seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

static void eval_progress_cb(void *user, size_t done, size_t total)
{
    eval_progress *p = user;
    if (!p->tty)
        return;
    double s = eval_seconds_since(&p->t0), rate = s > 0 ? (double)done / s : 0;
    double eta = rate > 0 ? (double)(total - done) / rate : 0;
    fprintf(stderr, "\reval: %zu/%zu items  %.1f items/s  ETA %.0fs   ", done, total, rate, eta);
    if (done == total)
        fputc('\n', stderr);
    fflush(stderr);
}

/* Under mpirun: every rank read the same task data (the files' SHA-256, which the
 * session computed as it read them); a node with another copy of a data file
 * would score other documents under the same ids. */
static int eval_dist_same_data(const eval_session *s, int n_tasks, qs_diag *d)
{
    if (dist_size() == 1)
        return 0;
    digest_sha256 h;
    digest_sha256_init(&h);
    for (int t = 0; t < n_tasks; t++) {
        const task_data *td = eval_session_task_data(s, t);
        for (int f = 0; f < td->n_files; f++)
            digest_sha256_update(&h, td->files[f].sha256, 64);
    }
    char hex[65];
    digest_sha256_final(&h, hex);
    return dist_agree(0, cli_hash64(hex, 64), "the task data under --data-dir", d);
}

/* The model hash: sha256 over "name sha256\n" of config.json and every
 * *.safetensors file, in name order.  _start lists the files and hashes them on
 * a background thread (digest_sha256_files_start); _finish combines. */
typedef struct eval_hash {
    char *names[CLI_MODEL_FILES_MAX];
    int n;
    digest_files_job *job;
} eval_hash;

static int eval_model_hash_start(eval_hash *h, const char *dir, qs_diag *d)
{
    memset(h, 0, sizeof *h);
    int rc = cli_model_files(dir, h->names, &h->n, d);
    if (rc)
        return rc;
    char *paths[CLI_MODEL_FILES_MAX] = {NULL};
    for (int i = 0; i < h->n && !rc; i++) {
        char path[1500];
        if ((rc = fileio_join(path, sizeof path, dir, h->names[i])) ||
            !(paths[i] = qs_strdup(path)))
            rc = diag_set(d, rc ? rc : QS_ENOMEM, dir, -1, "cannot name the model files");
    }
    if (!rc)   /* the job copies the list */
        rc = digest_sha256_files_start(&h->job, (const char *const *)paths, h->n, d);
    for (int i = 0; i < h->n; i++)
        qs_free(paths[i]);
    return rc;
}

/* Waits for the hashes (hex NULL: only stops the job) and frees h. */
static int eval_model_hash_finish(eval_hash *h, char hex[65], qs_diag *d)
{
    char (*files)[65] = hex ? qs_calloc(h->n > 0 ? (size_t)h->n : 1, 65) : NULL;
    int rc = hex && !files ? QS_ENOMEM : 0;
    int rj = digest_sha256_files_finish(h->job, files, d);
    rc = rc ? diag_set(d, rc, NULL, -1, "out of memory") : rj;
    if (!rc && hex) {
        digest_sha256 all;
        digest_sha256_init(&all);
        for (int i = 0; i < h->n; i++) {
            digest_sha256_update(&all, h->names[i], strlen(h->names[i]));
            digest_sha256_update(&all, " ", 1);
            digest_sha256_update(&all, files[i], 64);
            digest_sha256_update(&all, "\n", 1);
        }
        digest_sha256_final(&all, hex);
    }
    for (int i = 0; i < h->n; i++)
        qs_free(h->names[i]);
    qs_free(files);
    memset(h, 0, sizeof *h);
    return rc;
}

static void eval_fmt(char *buf, size_t n, double v, double se)
{
    if (v != v)
        snprintf(buf, n, "-");
    else if (se != se)
        snprintf(buf, n, "%.4f ± N/A", v);
    else
        snprintf(buf, n, "%.4f ± %.4f", v, se);
}

static void eval_summary_print(const eval_session *s)
{
    int n_rows;
    const eval_row *rows = eval_session_rows(s, &n_rows);
    printf("%-44s %7s  %-17s  %-17s\n", "task", "n", "acc ± stderr", "acc_norm ± stderr");
    for (int r = 0; r < n_rows; r++) {
        const eval_row *row = &rows[r];
        if (!row->n_effective)
            continue;
        int depth = 0;
        for (int p = row->parent; p >= 0; p = rows[p].parent)
            depth++;
        char name[128], a[48], b[48];
        snprintf(name, sizeof name, "%*s%s", 2 * depth, "", row->name);
        eval_fmt(a, sizeof a, row->acc.value, row->acc.stderr_);
        if (row->has_norm)
            eval_fmt(b, sizeof b, row->acc_norm.value, row->acc_norm.stderr_);
        else
            snprintf(b, sizeof b, "-");
        printf("%-44s %7zu  %-17s  %-17s\n", name, row->n_effective, a, b);
        if (row->is_group && row->parent < 0)
            printf("%-44s %7s  %.4f (unweighted mean of subjects)\n", "  (subject mean)", "",
                   row->acc_subject_mean);
    }
    for (int t = 0; t < eval_session_n_tasks(s); t++)
        if (eval_session_task_data(s, t)->contexts_as_given)
            printf("note: %s data is %s\n", eval_session_task_def(s, t)->name,
                   eval_session_task_data(s, t)->format);
}

typedef struct eval_args {
    const char *model, *tasks, *data_dir, *output, *samples, *tasks_dir, *precision;
    const char *quant_modules, *quant_scaling;
    int scaling;   /* EVALQUANT_* */
    int matmul, hif8;   /* from --precision: MATMUL_*, and 1 for the hif8 forms */
    long shots, limit, subset, subset_seed, threads, batch, max_length;
    int bos, subset_seed_set;
} eval_args;

static int eval_args_parse(int argc, char **argv, eval_args *a)
{
    memset(a, 0, sizeof *a);
    a->precision = "fp32";
    a->bos = TOKENIZER_BOS_DEFAULT;
    a->batch = 32;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = NULL;
        int rc = 0;
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            fputs(eval_usage, stdout);
            return -1;
        }
        if (!strcmp(f, "--bos") || !strcmp(f, "--no-bos")) {
            int want = !strcmp(f, "--bos") ? TOKENIZER_BOS_YES : TOKENIZER_BOS_NO;
            if (a->bos != TOKENIZER_BOS_DEFAULT && a->bos != want)
                return cli_error("--bos and --no-bos exclude each other: give one");
            a->bos = want;
            continue;
        }
#define EVAL_STR(name, field)                                                   \
    if (cli_flag_is(f, name)) {                                                 \
        if (!(v = cli_flag_value(argc, argv, &i)))                              \
            return CLI_EXIT_USAGE;                                              \
        a->field = v;                                                           \
        continue;                                                               \
    }
#define EVAL_LONG(name, field, lo, hi)                                          \
    if (cli_flag_is(f, name)) {                                                 \
        if (!(v = cli_flag_value(argc, argv, &i)))                              \
            return CLI_EXIT_USAGE;                                              \
        if ((rc = cli_parse_long(name, v, lo, hi, &a->field)))                  \
            return rc;                                                          \
        continue;                                                               \
    }
        EVAL_STR("--model", model)
        EVAL_STR("--tasks", tasks)
        EVAL_STR("--data-dir", data_dir)
        EVAL_STR("--output", output)
        EVAL_STR("--log-samples", samples)
        EVAL_STR("--tasks-dir", tasks_dir)
        EVAL_STR("--precision", precision)
        EVAL_STR("--quant-modules", quant_modules)
        EVAL_STR("--quant-scaling", quant_scaling)
        EVAL_LONG("--shots", shots, 0, 64)
        EVAL_LONG("--limit", limit, 1, 1000000000)
        EVAL_LONG("--subset", subset, 1, 1000000000)
        EVAL_LONG("--threads", threads, 1, 1024)
        EVAL_LONG("--batch", batch, 1, 65536)
        EVAL_LONG("--max-length", max_length, 2, 1 << 20)
        if (cli_flag_is(f, "--subset-seed")) {
            if (!(v = cli_flag_value(argc, argv, &i)))
                return CLI_EXIT_USAGE;
            if ((rc = cli_parse_long("--subset-seed", v, 0, 0x7fffffffffffffffL, &a->subset_seed)))
                return rc;
            a->subset_seed_set = 1;
            continue;
        }
#undef EVAL_STR
#undef EVAL_LONG
        return cli_error("eval: unknown argument '%s' (argument %d); run 'qatscope eval --help'", f,
                         i);
    }
    if (!a->model || !a->tasks || !a->data_dir || !a->output)
        return cli_error("eval: --model, --tasks, --data-dir and --output are required");
    if (a->limit && a->subset)
        return cli_error("eval: --limit and --subset are exclusive");
    if (a->subset_seed_set && !a->subset)
        return cli_error("eval: --subset-seed needs --subset");
    /* hif8 = bf16 matmuls + HiF8 W8A8 fake-quant of the planned Linears; hif8-fp32
     * the same over fp32 matmuls */
    qs_diag pd = {0};
    if (cli_precision_parse(a->precision, "--precision", &a->matmul, &a->hif8, &pd))
        return cli_diag_error(&pd);
    if (a->quant_modules && !a->hif8)
        return cli_error("--quant-modules: only with --precision hif8 or hif8-fp32 (got %s)",
                         a->precision);
    if (a->quant_scaling && !a->hif8)
        return cli_error("--quant-scaling: only with --precision hif8 or hif8-fp32 (got %s)",
                         a->precision);
    qs_diag d = {0};
    a->scaling = EVALQUANT_AUTO;
    if (a->quant_scaling && evalquant_scaling_parse(a->quant_scaling, &a->scaling, &d))
        return cli_error("%s", d.msg);
    return 0;
}

int cmd_eval(int argc, char **argv)
{
    eval_args a;
    int rc = eval_args_parse(argc, argv, &a);
    if (rc)
        return rc < 0 ? CLI_EXIT_OK : rc;
    char task_buf[512], *names[EVAL_MAX_TASKS];
    int n_tasks = 0;
    snprintf(task_buf, sizeof task_buf, "%s", a.tasks);
    for (char *t = task_buf, *comma; t; t = comma ? comma + 1 : NULL) {   /* no empty item */
        if ((comma = strchr(t, ',')))
            *comma = 0;
        if (!*t)
            return cli_error("--tasks: expected a comma-separated list of task names, got '%s' "
                             "(an empty item)", a.tasks);
        if (n_tasks == EVAL_MAX_TASKS)
            return cli_error("--tasks: at most %d tasks", EVAL_MAX_TASKS);
        names[n_tasks++] = t;
    }
    if (!fileio_is_dir(a.data_dir))
        return cli_error("--data-dir: '%s' is not a directory", a.data_dir);
    char tasks_dir[1100];
    if (a.tasks_dir)
        snprintf(tasks_dir, sizeof tasks_dir, "%s", a.tasks_dir);
    else   /* the tasks/ of the binary's tree (cli_install_path), else ./tasks */
        cli_install_path("tasks", tasks_dir, sizeof tasks_dir);
    /* the outputs are checked (and their directories made) before hours of scoring */
    cli_outputs outs = {0};
    if (a.samples && (rc = cli_output_not_input("--log-samples", a.samples, "--output", a.output)))
        return rc;
    /* never one of the inputs: the model's files, the task data, the task definitions */
    const char *outs_f[2] = {"--output", "--log-samples"}, *outs_p[2] = {a.output, a.samples};
    for (int i = 0; i < 2; i++)
        if ((rc = cli_output_not_under(outs_f[i], outs_p[i], "--model", a.model)) ||
            (rc = cli_output_not_under(outs_f[i], outs_p[i], "--data-dir", a.data_dir)) ||
            (rc = cli_output_not_under(outs_f[i], outs_p[i], "--tasks-dir", tasks_dir)))
            return rc;
    if ((rc = cli_outputs_add(&outs, "--output", a.output)) ||
        (a.samples && (rc = cli_outputs_add(&outs, "--log-samples", a.samples))))
        return rc;
#ifdef _OPENMP
    if (a.threads)
        omp_set_num_threads((int)a.threads);
#endif

    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    qs_diag d = {0};
    tokenizer *tok = NULL;
    llama_model m;
    memset(&m, 0, sizeof m);
    model_lm *mlm = NULL;
    eval_session *s = NULL;
    evalquant *eq = NULL;
    char model_hash[65] = "", state_hash[65] = "";
    eval_hash hash = {0};
    digest_files_job *state_job = NULL;
    llama_config cfg;
    if ((rc = hfconfig_load(&cfg, a.model, &d)) || (rc = tokenizer_create(&tok, a.model, &d)) ||
        (rc = cli_tokenizer_fits(tok, &cfg, a.model, &d)))
        goto fail;
    /* the task files are read and their items tokenized before the weights are
     * loaded: a missing file or a bad line fails in a second, not after a 1B
     * model's half minute of loading */
    eval_options o;
    eval_options_default(&o);
    o.tasks_dir = tasks_dir;
    o.data_dir = a.data_dir;
    o.tasks = (const char *const *)names;
    o.n_tasks = n_tasks;
    o.shots = (int)a.shots;
    o.limit = a.limit;
    o.subset = a.subset;
    o.subset_seed = (uint64_t)a.subset_seed;
    o.add_bos = a.bos;
    o.batch_items = (int)a.batch;
    int32_t bos = tokenizer_bos_id(tok);
    eval_encoder enc = {tok, eval_encode_cb, bos >= 0 ? bos : tokenizer_eos_id(tok)};
    if ((rc = eval_session_create(&s, &o, &enc, &d)))
        goto fail;
    /* the context against the config and each continuation against the context,
     * before the weights too (they failed after a 1B model's load) */
    const int ctx_cfg = hfconfig_max_context(&cfg);
    if (a.max_length > ctx_cfg) {
        rc = cli_error("--max-length: %ld exceeds the model's context of %d (%s/config.json)",
                       a.max_length, ctx_cfg, a.model);
        goto done;
    }
    {
        const int ctx = a.max_length ? (int)a.max_length : ctx_cfg;
        size_t n_items;
        const eval_item *items = eval_session_items(s, &n_items);
        for (size_t i = 0; i < n_items; i++) {
            lm_request req;
            eval_session_request(s, i, &req);
            for (int c = 0; c < req.n_cont; c++)
                if (req.n_cont_tok[c] > (size_t)ctx) {   /* named by its data file and line */
                    const char *file;
                    const task_doc *doc = task_data_find(eval_session_task_data(s, items[i].task),
                                                         items[i].subject, items[i].doc_id, &file);
                    diag_set(&d, QS_ERANGE, file, doc ? doc->line : -1,
                             "%s doc %ld: choice %d is %zu tokens, more than the context of %d (%s)",
                             eval_session_task_def(s, items[i].task)->name, items[i].doc_id, c,
                             req.n_cont_tok[c], ctx, a.max_length ? "--max-length" : "config.json");
                    rc = cli_diag_error(&d);
                    goto done;
                }
        }
    }
    double tasks_s = eval_seconds_since(&t0);
    struct timespec tl;
    clock_gettime(CLOCK_MONOTONIC, &tl);
    /* one job, one model and one data set: every rank's copies agree */
    if ((rc = eval_dist_same_data(s, n_tasks, &d)) || (rc = cli_dist_same_model(a.model, &d)) ||
        (rc = model_load_packed(&m, a.model, a.matmul, &d)))
        goto fail;
    /* the model files are hashed on a background thread from here on, while the
     * items are scored; results.json waits for it */
    if (dist_rank() == 0 && (rc = eval_model_hash_start(&hash, a.model, &d)))
        goto fail;
    evalquant_options qo = {a.quant_modules, a.scaling, a.model};
    if (a.hif8 && (rc = evalquant_create_opts(&eq, &m, &qo, &d)))
        goto fail;
    /* the arithmetic of the export: its other tensors are bf16 */
    if (a.hif8 && (rc = model_params_round_bf16(&m, &d)))
        goto fail;
    /* the file of the histories that set the scales: hashed on a background
     * thread as the model files are (through the hash cache: a checkpoint
     * evaluated again is not read again), collected for results.json */
    if (evalquant_scaling(eq) == EVALQUANT_DELAYED && dist_rank() == 0) {
        char state_path[1200];
        snprintf(state_path, sizeof state_path, "%s/train_state.bin", a.model);
        const char *paths[1] = {state_path};
        if ((rc = digest_sha256_files_start(&state_job, paths, 1, &d)))
            goto fail;
    }
    /* load ends here, not after the read: preparing the quantized weights (fake-
     * quantized and packed once, seconds at 1B) is part of getting the model ready,
     * and left out it was in none of the last line's fields */
    double load_s = eval_seconds_since(&tl);
    /* a cap: the scorer's arenas follow the longest real request */
    int max_len = a.max_length ? (int)a.max_length : hfconfig_max_context(&m.cfg);
    if ((rc = model_lm_create(&mlm, &m, max_len, &d)))
        goto fail;
    eval_progress prog = {t0, isatty(2)};
    clock_gettime(CLOCK_MONOTONIC, &prog.t0);
    lm_scorer lm = model_lm_scorer(mlm);
    /* under mpirun: every rank scores a share, rank 0 writes and prints */
    if ((rc = eval_session_run_dist(s, &lm, eval_progress_cb, &prog, &d)) || dist_rank() != 0) {
        if (rc && !d.path[0] && (rc == QS_ENAN || rc == QS_ENOMEM))   /* the model's forward */
            snprintf(d.path, sizeof d.path, "%s", a.model);
        goto fail;
    }
    double score_s = eval_seconds_since(&prog.t0);
    struct timespec th;
    clock_gettime(CLOCK_MONOTONIC, &th);
    if ((rc = eval_model_hash_finish(&hash, model_hash, &d)))
        goto fail;
    if (state_job) {
        char hex[1][65];
        rc = digest_sha256_files_finish(state_job, hex, &d);
        state_job = NULL;
        if (rc)
            goto fail;
        memcpy(state_hash, hex[0], sizeof state_hash);
    }
    double hash_wait_s = eval_seconds_since(&th);
    int bos_added = a.bos == TOKENIZER_BOS_DEFAULT ? tokenizer_adds_bos(tok) : a.bos;
    char bos_rule[96], cmdline[2048] = "qatscope";
    snprintf(bos_rule, sizeof bos_rule, "%s (%s BOS)",
             a.bos == TOKENIZER_BOS_DEFAULT ? "tokenizer default" : a.bos ? "--bos" : "--no-bos",
             bos_added ? "adds" : "no");
    for (int i = 0; i < argc; i++) {
        size_t u = strlen(cmdline);
        snprintf(cmdline + u, sizeof cmdline - u, " %s", argv[i]);
    }
    results_meta meta = {a.model, model_hash, a.precision, a.threads ? (int)a.threads : 0,
                         bos_added, bos_rule, tokenizer_kind(tok), max_len,
                         eval_seconds_since(&t0), (long long)time(NULL), cmdline,
                         NULL, 0, NULL, NULL, NULL};
    const char *qmods[512];
    for (int i = 0; i < evalquant_count(eq) && meta.n_quant < 512; i++)
        qmods[meta.n_quant++] = evalquant_module(eq, i);
    char q8names[512][64];   /* a HiF8 checkpoint run as it is: W8A8 on its codes */
    for (int i = 0; !eq && m.hif8 && i < m.hif8->n && meta.n_quant < 512; i++) {
        qplan_module_name(q8names[i], (int)sizeof q8names[i], m.hif8->lin[i].layer,
                          m.hif8->lin[i].module);
        qmods[meta.n_quant++] = q8names[i];
    }
    const char *q8scaling = m.hif8 && m.hif8->dynamic ? "stored (dynamic per token)"
                                                     : "stored (static)";
    meta.quant_modules = qmods;
    meta.quant_scaling = eq ? evalquant_scaling_name(eq) : m.hif8 ? q8scaling : NULL;
    meta.quant_recipe = eq ? evalquant_recipe_text(eq)
                           : m.hif8 ? "HiF8 checkpoint: W8A8 on the stored codes and scales" : NULL;
    meta.quant_state_hash = state_hash[0] ? state_hash : NULL;
#ifdef _OPENMP
    if (!a.threads)
        meta.threads = omp_get_max_threads();
#endif
    /* both to their temp names; into place only when both were written */
    if ((rc = results_json_write(cli_outputs_tmp(&outs, 0), s, &meta, &d)) ||
        (a.samples && (rc = results_samples_write(cli_outputs_tmp(&outs, 1), s, &d))))
        goto fail;
    if (cli_outputs_commit(&outs)) {
        rc = QS_EIO;   /* already reported */
        goto done;
    }
    eval_summary_print(s);
    if (eq)
        printf("hif8 W8A8 on %d Linear modules, scaling %s: %s\n", evalquant_count(eq),
               evalquant_scaling_name(eq), evalquant_recipe_text(eq));
    else if (m.hif8)
        printf("HiF8 checkpoint: W8A8 on %d Linear modules, scaling %s\n", m.hif8->n, q8scaling);
    size_t n_items;
    eval_session_items(s, &n_items);
    printf("%zu items in %.1f s (load %.1f s, scoring %.1f s, hash wait %.1f s, tasks %.1f s); "
           "results: %s%s%s\n", n_items, eval_seconds_since(&t0), load_s, score_s, hash_wait_s,
           tasks_s, a.output,
           a.samples ? "; samples: " : "", a.samples ? a.samples : "");
fail:
    for (int i = 0; rc && i < outs.n; i++)   /* the output's name, not its temp name */
        diag_rebase(&d, cli_outputs_tmp(&outs, i), outs.f[i].path);
    if (rc)
        cli_diag_error(&d);
done:
    eval_model_hash_finish(&hash, NULL, NULL);
    if (state_job)
        digest_sha256_files_finish(state_job, NULL, NULL);
    cli_outputs_discard(&outs);
    eval_session_destroy(s);
    model_lm_destroy(mlm);
    evalquant_destroy(eq);
    model_free(&m);
    tokenizer_destroy(tok);
    return rc ? CLI_EXIT_USAGE : CLI_EXIT_OK;
}
