/* repro_world.c: the reproduction's fact world (see include/qs/repro.h).
 *
 * People: a first name + an invented surname (prefix + suffix syllables), unique,
 * drawn by a seeded permutation.  Each person has one value per attribute, drawn
 * uniformly.  A biography states all of a person's facts in a shuffled order,
 * each in one of the attribute's training templates; every person gets
 * renders_per_entity biographies, and qa_per_entity question-answer documents
 * (each fact asked in one of the attribute's training question templates,
 * answered).  The probe asks one question per fact in one of the attribute's
 * probe templates, which the training text never uses, with 4 choices: the
 * value and 3 other values of the attribute.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "repro_impl.h"

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const char *const world_first[] = {"Ana", "Ben", "Ivy", "Leo", "Lily", "Max", "Mia",
                                          "Sam", "Tom", "Zoe", "Ada", "Eli", "Finn", "Gus",
                                          "Hana", "Jude", "Kai", "Nora", "Owen", "Ruby"};
static const char *const world_sur_a[] = {"Bar", "Cor", "Dal", "Fen", "Gil", "Hol", "Kes", "Lor",
                                          "Mar", "Nel", "Pol", "Ros", "Tal", "Ver", "Wen", "Ash"};
static const char *const world_sur_b[] = {"by", "den", "ford", "ton", "well",
                                          "wick", "more", "ley", "son", "dale"};

static const char *const v_town[] = {"Pellow", "Brimsby", "Caddon", "Dunmere", "Elswick",
                                     "Farlow", "Glenby",  "Harrow", "Kelby",   "Lunder"};
static const char *const t_town[] = {"{N} lives in {V}.", "The home of {N} is in {V}.",
                                     "{N} has a house in the town of {V}.",
                                     "In {V} you can meet {N} every day.", "{N} moved to {V} long ago."};
static const char *const q_town[] = {"Where does {N} live?", "Which town is home to {N}?",
                                     "In what town does {N} have a house?",
                                     "Where can you meet {N} every day?",
                                     "Which town did {N} move to?", "What town does {N} live in?"};
static const char *const p_town[] = {"What is the home town of {N}?",
                                     "In which town is the house of {N}?"};

static const char *const v_pet[] = {"cat", "dog",  "bird", "fox", "frog",
                                    "duck", "bear", "fish", "owl", "mouse"};
static const char *const t_pet[] = {"{N} has a pet {V}.", "The pet of {N} is a {V}.",
                                    "{N} takes care of a little {V}.", "A {V} lives with {N}.",
                                    "Every morning {N} feeds the {V}."};
static const char *const q_pet[] = {"What pet does {N} have?", "Which animal lives with {N}?",
                                    "What does {N} feed every morning?",
                                    "Which animal does {N} take care of?",
                                    "What kind of pet lives with {N}?", "What is the pet of {N}?"};
static const char *const p_pet[] = {"What animal does {N} keep as a pet?",
                                    "Which pet belongs to {N}?"};

static const char *const v_job[] = {"farmer", "baker",  "doctor",  "teacher", "painter",
                                    "sailor", "singer", "builder", "miner",   "tailor"};
static const char *const t_job[] = {"{N} works as a {V}.", "{N} is a {V}.",
                                    "By trade, {N} is a {V}.",
                                    "As a {V}, {N} works hard every day.",
                                    "{N} earns a living as a {V}."};
static const char *const q_job[] = {"What is the job of {N}?", "What does {N} work as?",
                                    "How does {N} earn a living?", "What is {N} by trade?",
                                    "What work does {N} do every day?", "Which job does {N} have?"};
static const char *const p_job[] = {"What does {N} do for work?", "Which trade does {N} have?"};

static const char *const v_color[] = {"red",    "blue",   "green", "yellow",
                                      "pink",   "purple", "orange", "white"};
static const char *const t_color[] = {"The favorite color of {N} is {V}.",
                                      "{N} likes the color {V} best.", "{N} always wears {V}.",
                                      "Everything {N} owns is {V}."};
static const char *const q_color[] = {"What is the favorite color of {N}?",
                                      "Which color does {N} like best?",
                                      "What color does {N} always wear?",
                                      "What color is everything {N} owns?",
                                      "Which color is the favorite of {N}?",
                                      "Which color suits {N} best?"};
static const char *const p_color[] = {"Which color does {N} love most?",
                                      "What color does {N} like?"};

#define ATTR(name, v, t, q, p) {name, v, N_OF(v), t, N_OF(t), q, N_OF(q), p, N_OF(p)}
static const repro_attr world_attrs[] = {
    ATTR("town", v_town, t_town, q_town, p_town),
    ATTR("pet", v_pet, t_pet, q_pet, p_pet),
    ATTR("job", v_job, t_job, q_job, p_job),
    ATTR("color", v_color, t_color, q_color, p_color),
};
#define WORLD_N_ATTRS N_OF(world_attrs)
#define WORLD_N_CHOICES 4

int repro_world_n_attrs(void) { return WORLD_N_ATTRS; }

const repro_attr *repro_world_attr(int i)
{
    return i >= 0 && i < WORLD_N_ATTRS ? &world_attrs[i] : NULL;
}

/* Streams of the seed: one per purpose, so changing one count moves nothing else. */
enum { WS_PEOPLE = 1, WS_FACTS, WS_BIOS, WS_PRE_STORIES, WS_CPT_STORIES, WS_MIX, WS_PROBE };

typedef struct world {
    const repro_world_opts *o;
    char (*name)[32];      /* [n_entities] */
    unsigned char *value;  /* [n_entities * WORLD_N_ATTRS] value index per fact */
} world;

/* template with {N} and {V} substituted */
static void world_fill(repro_buf *b, const char *tpl, const char *name, const char *value)
{
    for (const char *s = tpl; *s; s++) {
        if (s[0] == '{' && (s[1] == 'N' || s[1] == 'V') && s[2] == '}') {
            repro_buf_printf(b, "%s", s[1] == 'N' ? name : value);
            s += 2;
        } else {
            repro_buf_printf(b, "%c", *s);
        }
    }
}

static int world_people(world *w, qs_diag *d)
{
    int n = w->o->n_entities, n_sur = N_OF(world_sur_a) * N_OF(world_sur_b);
    uint32_t total = (uint32_t)(N_OF(world_first) * n_sur);
    uint32_t *perm = qs_malloc(total * sizeof *perm);
    w->name = qs_calloc((size_t)n, sizeof *w->name);
    w->value = qs_malloc((size_t)n * WORLD_N_ATTRS);
    if (!perm || !w->name || !w->value) {
        qs_free(perm);
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    }
    rng r;
    rng_seed_stream(&r, w->o->seed, WS_PEOPLE);
    for (uint32_t i = 0; i < total; i++)
        perm[i] = i;
    rng_shuffle_u32(&r, perm, total);
    for (int e = 0; e < n; e++) {
        uint32_t k = perm[e], first = k / (uint32_t)n_sur, sur = k % (uint32_t)n_sur;
        snprintf(w->name[e], sizeof w->name[e], "%s %s%s", world_first[first],
                 world_sur_a[sur / N_OF(world_sur_b)], world_sur_b[sur % N_OF(world_sur_b)]);
    }
    qs_free(perm);
    rng_seed_stream(&r, w->o->seed, WS_FACTS);
    for (int e = 0; e < n; e++)
        for (int a = 0; a < WORLD_N_ATTRS; a++)
            w->value[e * WORLD_N_ATTRS + a] = (unsigned char)rng_below(&r, (uint32_t)world_attrs[a].n_values);
    return 0;
}

static void world_bio(const world *w, int e, rng *r, repro_buf *b)
{
    uint32_t order[WORLD_N_ATTRS];
    for (int a = 0; a < WORLD_N_ATTRS; a++)
        order[a] = (uint32_t)a;
    rng_shuffle_u32(r, order, WORLD_N_ATTRS);
    for (int i = 0; i < WORLD_N_ATTRS; i++) {
        const repro_attr *at = &world_attrs[order[i]];
        const char *tpl = at->train[rng_below(r, (uint32_t)at->n_train)];
        if (i)
            repro_buf_printf(b, " ");
        world_fill(b, tpl, w->name[e], at->values[w->value[e * WORLD_N_ATTRS + order[i]]]);
    }
}

/* "Question: ...\nAnswer: V" for each of a person's facts, in a shuffled order */
static void world_qa(const world *w, int e, rng *r, repro_buf *b)
{
    uint32_t order[WORLD_N_ATTRS];
    for (int a = 0; a < WORLD_N_ATTRS; a++)
        order[a] = (uint32_t)a;
    rng_shuffle_u32(r, order, WORLD_N_ATTRS);
    for (int i = 0; i < WORLD_N_ATTRS; i++) {
        const repro_attr *at = &world_attrs[order[i]];
        repro_buf_printf(b, "%sQuestion: ", i ? "\n" : "");
        world_fill(b, at->qa[rng_below(r, (uint32_t)at->n_qa)], w->name[e], "");
        repro_buf_printf(b, "\nAnswer: %s.", at->values[w->value[e * WORLD_N_ATTRS + order[i]]]);
    }
}

/* pretrain.txt: every biography, question-answer document and pretrain_stories
 * stories, in a seeded order */
static int world_pretrain_text(const world *w, repro_buf *b, long *n_docs, qs_diag *d)
{
    long n_bios = (long)w->o->n_entities * w->o->renders_per_entity;
    long n_qa = (long)w->o->n_entities * w->o->qa_per_entity;
    long n = n_bios + n_qa + w->o->pretrain_stories;
    if (n > 0xffffffffL)
        return diag_set(d, QS_ERANGE, NULL, -1, "too many documents (%ld)", n);
    uint32_t *order = qs_malloc((size_t)(n ? n : 1) * sizeof *order);
    if (!order)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    for (long i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    rng mix, bios, stories;
    rng_seed_stream(&mix, w->o->seed, WS_MIX);
    rng_seed_stream(&bios, w->o->seed, WS_BIOS);
    rng_seed_stream(&stories, w->o->seed, WS_PRE_STORIES);
    rng_shuffle_u32(&mix, order, (size_t)n);
    for (long i = 0; i < n; i++) {
        if (i)
            repro_buf_printf(b, "\n\n");
        if (order[i] < (uint32_t)n_bios)
            world_bio(w, (int)(order[i] % (uint32_t)w->o->n_entities), &bios, b);
        else if (order[i] < (uint32_t)(n_bios + n_qa))
            world_qa(w, (int)(order[i] % (uint32_t)w->o->n_entities), &bios, b);
        else
            repro_story_append(b, &stories);
    }
    repro_buf_printf(b, "\n");
    qs_free(order);
    *n_docs = n;
    return b->failed ? diag_set(d, QS_ENOMEM, NULL, -1, "out of memory") : 0;
}

static int world_cpt_text(const world *w, repro_buf *b, qs_diag *d)
{
    rng r;
    rng_seed_stream(&r, w->o->seed, WS_CPT_STORIES);
    for (long i = 0; i < w->o->cpt_stories; i++) {
        if (i)
            repro_buf_printf(b, "\n\n");
        repro_story_append(b, &r);
    }
    repro_buf_printf(b, "\n");
    return b->failed ? diag_set(d, QS_ENOMEM, NULL, -1, "out of memory") : 0;
}

/* One ARC (HF layout) record per fact; facts.tsv beside it. */
static int world_probe_text(const world *w, repro_buf *probe, repro_buf *tsv, qs_diag *d)
{
    rng r;
    rng_seed_stream(&r, w->o->seed, WS_PROBE);
    static const char labels[] = "ABCD";
    repro_buf_printf(tsv, "person\tattribute\tvalue\n");
    for (int e = 0; e < w->o->n_entities; e++)
        for (int a = 0; a < WORLD_N_ATTRS; a++) {
            const repro_attr *at = &world_attrs[a];
            int gold_v = w->value[e * WORLD_N_ATTRS + a];
            repro_buf_printf(tsv, "%s\t%s\t%s\n", w->name[e], at->name, at->values[gold_v]);
            /* 3 distinct distractors: a seeded shuffle of the other values */
            uint32_t others[16];
            int n_o = 0;
            for (int v = 0; v < at->n_values; v++)
                if (v != gold_v)
                    others[n_o++] = (uint32_t)v;
            rng_shuffle_u32(&r, others, (size_t)n_o);
            int gold_pos = (int)rng_below(&r, WORLD_N_CHOICES);
            uint32_t choice[WORLD_N_CHOICES];
            for (int c = 0, k = 0; c < WORLD_N_CHOICES; c++)
                choice[c] = c == gold_pos ? (uint32_t)gold_v : others[k++];
            const char *tpl = at->probe[rng_below(&r, (uint32_t)at->n_probe)];
            repro_buf_printf(probe, "{\"id\":\"fact-%d-%s\",\"question\":\"", e, at->name);
            world_fill(probe, tpl, w->name[e], "");
            repro_buf_printf(probe, "\",\"choices\":{\"text\":[");
            for (int c = 0; c < WORLD_N_CHOICES; c++)
                repro_buf_printf(probe, "%s\"%s\"", c ? "," : "", at->values[choice[c]]);
            repro_buf_printf(probe, "],\"label\":[");
            for (int c = 0; c < WORLD_N_CHOICES; c++)
                repro_buf_printf(probe, "%s\"%c\"", c ? "," : "", labels[c]);
            repro_buf_printf(probe, "]},\"answerKey\":\"%c\"}\n", labels[gold_pos]);
        }
    return probe->failed || tsv->failed ? diag_set(d, QS_ENOMEM, NULL, -1, "out of memory") : 0;
}

static json_t *world_strings(const char *const *s, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_string(s[i]));
    return a;
}

static int world_json_write(const repro_world_opts *o, const repro_world_summary *s,
                            const char *path, qs_diag *d)
{
    json_t *attrs = json_array();
    for (int a = 0; a < WORLD_N_ATTRS; a++)
        json_array_append_new(
            attrs, json_pack("{s:s,s:o,s:o,s:o,s:o}", "name", world_attrs[a].name, "values",
                             world_strings(world_attrs[a].values, world_attrs[a].n_values),
                             "train_templates",
                             world_strings(world_attrs[a].train, world_attrs[a].n_train),
                             "train_questions", world_strings(world_attrs[a].qa, world_attrs[a].n_qa),
                             "probe_templates",
                             world_strings(world_attrs[a].probe, world_attrs[a].n_probe)));
    json_t *root = json_pack(
        "{s:I,s:i,s:i,s:i,s:I,s:I,s:i,s:I,s:I,s:I,s:s,s:o}", "seed", (json_int_t)o->seed, "entities",
        o->n_entities, "renders_per_entity", o->renders_per_entity, "qa_per_entity",
        o->qa_per_entity, "pretrain_stories",
        (json_int_t)o->pretrain_stories, "cpt_stories", (json_int_t)o->cpt_stories, "facts",
        s->n_facts, "pretrain_docs", (json_int_t)s->pretrain_docs, "cpt_docs",
        (json_int_t)s->cpt_docs, "probe_items", (json_int_t)s->probe_items, "probe_file",
        REPRO_PROBE_FILE, "attributes", attrs);
    int rc = repro_json_write(root, path, d);
    json_decref(root);
    return rc;
}

int repro_world_write(const repro_world_opts *o, const char *dir, repro_world_summary *s,
                      qs_diag *d)
{
    memset(s, 0, sizeof *s);
    if (o->n_entities < 1 || o->n_entities > REPRO_MAX_ENTITIES || o->renders_per_entity < 1 ||
        o->qa_per_entity < 0 ||
        o->pretrain_stories < 0 || o->cpt_stories < 1)
        return diag_set(d, QS_EINVAL, dir, -1,
                        "world: expected 1..%d people, >= 1 biography each and >= 1 "
                        "continued-pretraining story", REPRO_MAX_ENTITIES);
    char path[1100];
    int rc;
    snprintf(path, sizeof path, "%s/facts", dir);
    if ((rc = fileio_mkdir_p(path, d)))
        return rc;
    world w = {o, NULL, NULL};
    repro_buf pre = {0}, cpt = {0}, probe = {0}, tsv = {0};
    if ((rc = world_people(&w, d)) || (rc = world_pretrain_text(&w, &pre, &s->pretrain_docs, d)) ||
        (rc = world_cpt_text(&w, &cpt, d)) || (rc = world_probe_text(&w, &probe, &tsv, d)))
        goto done;
    s->n_entities = o->n_entities;
    s->n_attrs = WORLD_N_ATTRS;
    s->n_facts = o->n_entities * WORLD_N_ATTRS;
    s->probe_items = s->n_facts;
    s->cpt_docs = o->cpt_stories;
    s->pretrain_bytes = pre.len;
    s->cpt_bytes = cpt.len;
    const struct { const char *name; const repro_buf *b; } files[] = {
        {"pretrain.txt", &pre}, {"cpt.txt", &cpt}, {REPRO_PROBE_FILE, &probe}, {"facts.tsv", &tsv}};
    for (int i = 0; i < N_OF(files) && !rc; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
        rc = fileio_write_atomic(path, files[i].b->p, files[i].b->len, d);
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/world.json", dir);
        rc = world_json_write(o, s, path, d);
    }
done:
    repro_buf_free(&pre);
    repro_buf_free(&cpt);
    repro_buf_free(&probe);
    repro_buf_free(&tsv);
    qs_free(w.name);
    qs_free(w.value);
    return rc;
}
