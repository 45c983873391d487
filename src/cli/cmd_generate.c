/* cmd_generate.c: qatscope generate — sample a continuation of a prompt.
 *
 *   qatscope generate --model DIR --prompt TEXT -n N [--temperature T] [--top-p P]
 *                     [--seed S] [--stop-ids LIST] [--precision fp32|bf16|bf16-amx|hif8|hif8-fp32]
 *
 * The prompt is encoded with the tokenizer's default BOS; text is streamed to
 * stdout as tokens arrive (prompt first); timing goes to stderr.  Defaults:
 * temperature 1.0, top-p 0.9, seed 42 (T = 0 is greedy); the stop set is the
 * EOS ids of config.json and the tokenizer, replaced by --stop-ids.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_model.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_infer.h"
#include "qs/sampler.h"
#include "qs/tokenizer.h"

static const char USAGE[] =
    "usage: qatscope generate --model DIR --prompt TEXT -n N [--temperature T] [--top-p P]\n"
    "                         [--seed S] [--stop-ids ID,ID,...]\n"
    "                         [--precision fp32|bf16|bf16-amx|hif8|hif8-fp32]\n"
    "hif8 (bf16 matmuls) and hif8-fp32: HiF8 W8A8 fake-quant as eval --precision hif8 (default\n"
    "selection; a run checkpoint: its delayed scales).\n";

#define GEN_MAX_STOP 16

typedef struct gen_stream {
    const tokenizer *tok;
    int32_t *ids;     /* prompt (without BOS) + generated */
    size_t n_ids;
    size_t printed;   /* bytes of the decoded text already written */
    int n_new;        /* new tokens seen */
    int tok_vocab;    /* ids the tokenizer can decode: [0, tok_vocab) */
    int n_unknown;    /* new tokens outside it (not printed; counted for a warning) */
    struct timespec t_first;   /* when the first new token came (the prompt's forward done) */
} gen_stream;

/* Decodes everything so far and prints the part not yet printed (whole-text
 * decoding keeps byte-fallback pieces and leading-space rules right). */
static int gen_flush(gen_stream *g)
{
    char *text;
    size_t len;
    qs_diag d = {0};
    if (tokenizer_decode(g->tok, g->ids, g->n_ids, 1, &text, &len, &d))
        return 0;
    if (len > g->printed) {
        fwrite(text + g->printed, 1, len - g->printed, stdout);
        fflush(stdout);
        g->printed = len;
    }
    qs_free(text);
    return 0;
}

static int gen_on_token(void *user, int32_t id)
{
    gen_stream *g = user;
    if (g->n_new++ == 0)
        clock_gettime(CLOCK_MONOTONIC, &g->t_first);
    /* A model may have more ids than its tokenizer (init allows it: the 1B
     * config's 153,376 with the Llama-2 tokenizer's 32,000).  Such an id has no
     * text: it is left out of the decoded ids, or the decode would fail on it
     * from then on and nothing more would be printed, and counted instead. */
    if (id < 0 || id >= g->tok_vocab) {
        g->n_unknown++;
        return 0;
    }
    g->ids[g->n_ids++] = id;
    return gen_flush(g);
}

/* "ID,ID,...": digits only between the commas; "" is the empty set (no stop) */
static int gen_parse_ids(const char *arg, int32_t *out, int *n)
{
    *n = 0;
    for (const char *s = arg; *s;) {
        char *end;
        long v = *s >= '0' && *s <= '9' ? strtol(s, &end, 10) : -1;
        if (v < 0 || v > 0x7fffffff || *n >= GEN_MAX_STOP || (*end && *end != ',') ||
            (*end == ',' && !end[1]))
            return cli_error("--stop-ids: expected up to %d comma-separated ids, got '%s'",
                             GEN_MAX_STOP, arg);
        out[(*n)++] = (int32_t)v;
        s = *end ? end + 1 : end;
    }
    return 0;
}

static int gen_run(const char *dir, const char *prompt, long n_new, double temp, double top_p,
                   long seed, const int32_t *stop_arg, int n_stop_arg, const char *precision)
{
    qs_diag d = {0};
    cli_model cm;
    tokenizer *tok = NULL;
    llama_acts a = {0};
    sampler s = {0};
    int32_t *ids = NULL, *out = NULL, stop[GEN_MAX_STOP + LLAMA_MAX_EOS + 1];
    size_t n_ids = 0;
    int rc = 0, n_stop = 0, n_out = 0;
    /* weights packed once, in the precision of the matmuls (no fp32 copy of a bf16
     * checkpoint in bf16), the fake-quant installed for hif8 */
    if (cli_model_open(&cm, dir, precision, NULL, EVALQUANT_AUTO, &d))
        return cli_diag_error(&d);
    llama_model *m = &cm.m;
    if (tokenizer_create(&tok, dir, &d) || cli_tokenizer_fits(tok, &m->cfg, dir, &d) ||
        tokenizer_encode(tok, prompt, strlen(prompt), TOKENIZER_BOS_DEFAULT, &ids, &n_ids, &d)) {
        rc = cli_diag_error(&d);
        goto done;
    }
    if (n_ids == 0) {
        rc = cli_error("generate: the prompt encodes to no tokens (and the tokenizer adds no BOS)");
        goto done;
    }
    int ctx = hfconfig_max_context(&m->cfg);
    if ((long)n_ids + n_new > ctx) {
        rc = cli_error("generate: prompt (%zu tokens) + -n %ld exceeds the model's context of %d",
                       n_ids, n_new, ctx);
        goto done;
    }
    if (n_stop_arg >= 0) {
        memcpy(stop, stop_arg, (size_t)n_stop_arg * sizeof *stop);
        n_stop = n_stop_arg;
    } else {
        for (int i = 0; i < m->cfg.n_eos; i++)
            stop[n_stop++] = m->cfg.eos_ids[i];
        if (tokenizer_eos_id(tok) >= 0)
            stop[n_stop++] = tokenizer_eos_id(tok);
    }
    if (model_generate_acts_init(&a, &m->cfg, (int)n_ids, (int)n_new, &d) ||
        sampler_init(&s, m->cfg.vocab_size, (float)temp, (float)top_p, (uint64_t)seed, &d)) {
        rc = cli_diag_error(&d);
        goto done;
    }
    out = qs_malloc((n_ids + (size_t)n_new + 1) * sizeof *out);
    if (!out) {
        rc = cli_error("generate: out of memory");
        goto done;
    }
    int has_bos = tokenizer_bos_id(tok) >= 0 && ids[0] == tokenizer_bos_id(tok);
    gen_stream g = {tok, out, n_ids - (size_t)has_bos, 0, 0, tokenizer_vocab_size(tok), 0,
                    {0, 0}};
    memcpy(out, ids + has_bos, g.n_ids * sizeof *out);
    gen_flush(&g);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (model_generate(m, &a, ids, (int)n_ids, (int)n_new, &s, stop, n_stop, out + g.n_ids,
                       &n_out, gen_on_token, &g, &d)) {
        putchar('\n');
        if (!d.path[0])   /* the forward's own errors name no file: the model does */
            snprintf(d.path, sizeof d.path, "%s", dir);
        rc = cli_diag_error(&d);
        goto done;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    putchar('\n');
    fflush(stdout);
    double sec = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    double prompt_s = g.n_new ? (g.t_first.tv_sec - t0.tv_sec) +
                                    (g.t_first.tv_nsec - t0.tv_nsec) * 1e-9
                              : sec;
    fprintf(stderr, "generate: %zu prompt + %d new tokens in %.3f s (%.1f tokens/s), %s", n_ids,
            n_out, sec, sec > 0 ? (n_ids + n_out) / sec : 0.0,
            precision);
    /* the two phases apart, as llama.cpp reports them: the prompt's forward
     * (and the first token), then one forward per further token */
    if (n_out > 1 && sec - prompt_s > 0)
        fprintf(stderr, "; prompt %.3f s, then %d tokens at %.2f tokens/s\n", prompt_s, n_out - 1,
                (n_out - 1) / (sec - prompt_s));
    else
        fprintf(stderr, "; prompt %.3f s\n", prompt_s);
    if (g.n_unknown)
        fprintf(stderr, "generate: warning: %d of the %d new tokens are ids outside the "
                "tokenizer's vocabulary [0, %d) (the model's vocab_size is %d): not printed\n",
                g.n_unknown, n_out, g.tok_vocab, m->cfg.vocab_size);
    if (fflush(stdout))
        rc = CLI_EXIT_USAGE;   /* main() names the error */
done:
    qs_free(out);
    qs_free(ids);
    sampler_free(&s);
    model_acts_free(&a);
    tokenizer_destroy(tok);
    cli_model_close(&cm);
    return rc;
}

int cmd_generate(int argc, char **argv)
{
    const char *model = NULL, *prompt = NULL, *stop_arg = NULL, *prec_arg = NULL;
    long n = -1, seed = 42;
    double temp = 1.0, top_p = 0.9;
    int32_t stop[GEN_MAX_STOP];
    int n_stop = -1, mm, hif8;
    const cli_opt opts[] = {
        {"--model", CLI_OPT_STR, .out = &model},
        {"--prompt", CLI_OPT_STR, .out = &prompt},
        {"-n", CLI_OPT_LONG, .out = &n, .min = 0, .max = 1L << 24},
        {"--temperature", CLI_OPT_DOUBLE, .out = &temp, .dmin = 0, .dmax = 100},
        {"--top-p", CLI_OPT_DOUBLE, .out = &top_p, .dmin = 1e-9, .dmax = 1},
        {"--seed", CLI_OPT_LONG, .out = &seed, .min = 0, .max = 0x7fffffffffffffffL},
        {"--stop-ids", CLI_OPT_STR, .out = &stop_arg},
        {"--precision", CLI_OPT_STR, .out = &prec_arg},
    };
    int rc = cli_args_parse("generate", USAGE, argc, argv, opts, sizeof opts / sizeof *opts, NULL,
                            NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    qs_diag pd = {0};
    if (stop_arg && (rc = gen_parse_ids(stop_arg, stop, &n_stop)))
        return rc;
    if (!prec_arg)
        prec_arg = "fp32";
    if (cli_precision_parse(prec_arg, "--precision", &mm, &hif8, &pd))
        return cli_diag_error(&pd);
    if (!model || !prompt || n < 0)
        return cli_error("generate: --model, --prompt and -n are required; see --help");
    return gen_run(model, prompt, n, temp, top_p, seed, stop, n_stop, prec_arg);
}
