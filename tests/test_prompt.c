/* test_prompt.c: golden prompt strings (spec/tasks.md rules + worked example),
 * HellaSwag preprocessing, Python's random for few-shot picks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/prompt.h"
#include "qs/pyrand.h"
#include "qs/task.h"
#include "test.h"

#define TD "tests/data/tasks/"
#define MMLU_HEAD "The following are multiple choice questions (with answers) about abstract algebra.\n\n"

/* Loaded task (real tasks/<name>.json) + data from a dir. */
typedef struct fx {
    task_def def;
    task_data td;
} fx;

static int fx_load(fx *f, const char *tasks_dir, const char *name, const char *data_dir, int shots)
{
    qs_diag d = {0};
    memset(f, 0, sizeof *f);
    if (task_def_load_named(&f->def, tasks_dir, name, &d) ||
        task_data_load(&f->td, &f->def, data_dir, shots, &d)) {
        fprintf(stderr, "    fixture %s: %s\n", name, d.msg);
        return -1;
    }
    return 0;
}

static void fx_free(fx *f)
{
    task_data_free(&f->td);
    task_def_free(&f->def);
}

/* context of doc i with k shots drawn like the session does (doc order) */
static char *fx_context(fx *f, size_t i, int k)
{
    pyrand r;
    pyrand_seed(&r, 1234);
    size_t shots[32];
    qs_diag d = {0};
    for (size_t j = 0; j <= i; j++)
        if (prompt_shots_pick(&f->def, &f->td, &f->td.docs[j], k, &r, shots, &d))
            return NULL;
    char *out = NULL;
    if (prompt_context_build(&f->def, &f->td, &f->td.docs[i], shots, k, &out, &d))
        return NULL;
    return out;
}

TEST(prompt, mmlu_zero_shot_matches_harness_layout)
{
    fx f;
    ASSERT_EQ_INT(fx_load(&f, TD "defs", "mmlu", TD "data", 0), 0);
    char *c = fx_context(&f, 0, 0);
    ASSERT_EQ_STR(c, MMLU_HEAD "Find the degree for the given field extension Q(sqrt(5), sqrt(7)) "
                               "over Q.\nA. 0\nB. 4\nC. 2\nD. 8\nAnswer:");
    qs_free(c);
    c = fx_context(&f, 1, 0);   /* question stripped (leading spaces, trailing newline) */
    ASSERT_EQ_STR(c, MMLU_HEAD "Let p = (1, 2, 5, 4)(2, 3) in S_5 . Find the index of <p> in S_5.\n"
                               "A. 8\nB. 2\nC. 24\nD. 120\nAnswer:");
    qs_free(c);
    c = fx_context(&f, 3, 0);   /* anatomy: choices verbatim, trailing space kept */
    ASSERT_EQ_STR(c, "The following are multiple choice questions (with answers) about anatomy.\n\n"
                     "What is the largest bone in the human body?\nA. Femur\nB. Tibia\nC. Humerus\n"
                     "D. Skull \nAnswer:");
    qs_free(c);
    ASSERT_EQ_STR(prompt_choice(&f.def, &f.td.docs[0], 1), "B");
    ASSERT_EQ_INT(prompt_n_choices(&f.def, &f.td.docs[0]), 4);
    fx_free(&f);
}

TEST(prompt, mmlu_k_shot_uses_first_dev_rows_of_the_subject)
{
    fx f;
    ASSERT_EQ_INT(fx_load(&f, TD "defs", "mmlu", TD "data", 2), 0);
    char *c = fx_context(&f, 0, 2);
    ASSERT_EQ_STR(c, MMLU_HEAD
                  "Find all c in Z_3 such that Z_3[x]/(x^2 + c) is a field.\nA. 0\nB. 1\nC. 2\nD. 3\n"
                  "Answer: B\n\n"
                  "Statement 1 | If aH is an element of a factor group. Statement 2 | Second.\n"
                  "A. True, True\nB. False, False\nC. True, False\nD. False, True\nAnswer: B\n\n"
                  "Find the degree for the given field extension Q(sqrt(5), sqrt(7)) over Q.\n"
                  "A. 0\nB. 4\nC. 2\nD. 8\nAnswer:");
    qs_free(c);
    c = fx_context(&f, 5, 1);   /* formal_logic: its own dev rows, subject words */
    ASSERT_EQ_STR(c, "The following are multiple choice questions (with answers) about formal logic.\n\n"
                     "Select the best translation: P and Q.\nA. P v Q\nB. P . Q\nC. P > Q\nD. ~P\n"
                     "Answer: B\n\nWhich is a valid argument form?\nA. Modus ponens\n"
                     "B. Begging the question\nC. Ad hominem\nD. Straw man\nAnswer:");
    qs_free(c);
    fx_free(&f);
}

TEST(prompt, arc_question_answer_and_seeded_shots)
{
    fx f;
    ASSERT_EQ_INT(fx_load(&f, "tasks", "arc_easy", TD "data", 2), 0);
    char *c = fx_context(&f, 3, 0);   /* the question is not stripped */
    ASSERT_EQ_STR(c, "Question: What do plants need to make food?  \nAnswer:");
    qs_free(c);
    ASSERT_EQ_STR(prompt_choice(&f.def, &f.td.docs[1], 2), "100 \xc2\xb0" "C");
    /* Python: r = random.Random(1234); [r.sample(range(6), 2) for _ in range(4)]
     *   -> [[3, 0], [0, 5], [4, 0], [5, 0]] */
    c = fx_context(&f, 0, 2);
    ASSERT_EQ_STR(c, "Question: Which gas do people breathe in to live?\nAnswer: oxygen\n\n"
                     "Question: What is frozen water called?\nAnswer: ice\n\n"
                     "Question: Which object is a source of light?\nAnswer:");
    qs_free(c);
    c = fx_context(&f, 1, 2);
    ASSERT_EQ_STR(c, "Question: What is frozen water called?\nAnswer: ice\n\n"
                     "Question: Which sense uses the nose?\nAnswer: smell\n\n"
                     "Question: Water boils at sea level at about which temperature?\nAnswer:");
    qs_free(c);
    fx_free(&f);
}

TEST(prompt, hellaswag_jsonl_gets_harness_preprocessing)
{
    fx f;
    ASSERT_EQ_INT(fx_load(&f, "tasks", "hellaswag", TD "data", 0), 0);
    ASSERT_EQ_INT(f.td.contexts_as_given, 0);
    ASSERT_EQ_INT(f.td.n_docs, 3);
    /* reference values from the harness's preprocess() run in Python */
    char *c = fx_context(&f, 0, 0);
    ASSERT_EQ_STR(c, "Roof shingle removal: A man is sitting on a roof. He");
    qs_free(c);
    c = fx_context(&f, 1, 0);
    ASSERT_EQ_STR(c, "Making a cake: How to bake a cake. Preheat the oven. The us flag is nearby ");
    qs_free(c);
    const task_doc *d1 = &f.td.docs[1];
    ASSERT_EQ_INT(d1->gold, 1);   /* label given as the string "1" */
    ASSERT_EQ_STR(d1->choices[0], " Mix the flour. Stir well.");
    ASSERT_EQ_STR(d1->choices[1], "Grease the pan  and pour the batter.");
    ASSERT_EQ_STR(d1->choices[2], " Eat the raw eggs.");
    ASSERT_EQ_STR(d1->choices[3], "Throw it out [unclosed");
    c = fx_context(&f, 2, 0);   /* empty ctx_b: trailing space stripped first */
    ASSERT_EQ_STR(c, "Ice fishing: A boy drills a hole in the ice.");
    qs_free(c);
    ASSERT_EQ_INT(prompt_utf8_len(f.td.docs[2].choices[2]), 6);   /* "Ça va." */
    fx_free(&f);
}

TEST(prompt, hellaswag_text_contexts_are_used_as_given)
{
    fx f;
    ASSERT_EQ_INT(fx_load(&f, "tasks", "hellaswag", TD "text", 0), 0);
    ASSERT_EQ_INT(f.td.contexts_as_given, 1);
    ASSERT_TRUE(strstr(f.td.format, "as given"));
    char *c = fx_context(&f, 0, 0);   /* no capitalisation of "he" */
    ASSERT_EQ_STR(c, "Roof shingle removal: A man is sitting on a roof. he");
    qs_free(c);
    fx_free(&f);
}

TEST(prompt, preprocess_and_capitalize_edge_cases)
{
    static const char *const pre[][2] = {
        {"  a [title] b  ", "a. b"}, {"x [header]y[step] z", "x y z"}, {"a   b", "a  b"},
        {"[a\n] keep", "[a\n] keep"}, {"[x]", ""}, {"end [title]", "end. "},
    };
    for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++) {
        char *o = prompt_hellaswag_preprocess(pre[i][0]);
        ASSERT_EQ_STR(o, pre[i][1]);
        qs_free(o);
    }
    static const char *const cap[][2] = {
        {"the US flag", "The us flag"}, {"", ""}, {"\xc3\xa9T\xc3\x89", "\xc3\x89t\xc3\xa9"},
        {"1ABC", "1abc"}, {"\xd0\xb4\xd0\x94", "\xd0\x94\xd0\xb4"},
    };
    for (size_t i = 0; i < sizeof cap / sizeof cap[0]; i++) {
        char *o = prompt_capitalize(cap[i][0]);
        ASSERT_EQ_STR(o, cap[i][1]);
        qs_free(o);
    }
    ASSERT_EQ_INT(prompt_utf8_len("Planetary density will decrease."), 32);
    ASSERT_EQ_INT(prompt_utf8_len("30 \xc2\xb0" "C"), 5);
    ASSERT_EQ_INT(prompt_utf8_len("\xe2\x82\xac\xf0\x9f\x98\x80"), 2);
}

TEST(prompt, pyrand_matches_cpython)
{
    char *text = NULL;
    size_t n = 0;
    qs_diag d = {0};
    ASSERT_OK(fileio_read_all(TD "pyrand_sample.txt", &text, &n, &d), &d);
    int lines = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *p = line;
        pyrand r;
        if (!strncmp(p, "u32 ", 4)) {
            unsigned long long seed = strtoull(p + 4, &p, 10);
            pyrand_seed(&r, seed);
            for (int i = 0; i < 8; i++)
                ASSERT_EQ_INT(pyrand_u32(&r), strtoul(p, &p, 10));
        } else {
            unsigned long long seed = strtoull(p + 7, &p, 10);
            size_t pop = strtoul(p, &p, 10), k = strtoul(p, &p, 10), calls = strtoul(p, &p, 10);
            size_t out[64];
            pyrand_seed(&r, seed);
            for (size_t c = 0; c < calls; c++) {
                ASSERT_OK(pyrand_sample(&r, pop, k, out, &d), &d);
                for (size_t i = 0; i < k; i++)
                    ASSERT_EQ_INT(out[i], strtoul(p, &p, 10));
            }
        }
        lines++;
    }
    qs_free(text);
    ASSERT_EQ_INT(lines, 12);
}

/* spec/tasks.md section 6, checked on the real data when ../shared is present */
TEST(prompt, spec_worked_example_on_shared_bench)
{
    char dir[512];
    if (!test_shared_path(dir, sizeof dir, "bench/mmlu/test/abstract_algebra_test.csv"))
        SKIP("../shared/bench not present");
    const char *bench = test_shared_path(dir, sizeof dir, "bench");
    fx f;
    memset(&f, 0, sizeof f);
    qs_diag d = {0};
    ASSERT_OK(task_def_load_named(&f.def, "tasks", "mmlu", &d), &d);
    ASSERT_OK(task_data_load(&f.td, &f.def, bench, 0, &d), &d);
    ASSERT_EQ_INT(f.td.n_docs, 14042);
    char *c = fx_context(&f, 0, 0);
    ASSERT_EQ_STR(c, MMLU_HEAD "Find the degree for the given field extension Q(sqrt(2), sqrt(3), "
                               "sqrt(18)) over Q.\nA. 0\nB. 4\nC. 2\nD. 6\nAnswer:");
    qs_free(c);
    ASSERT_EQ_INT(f.td.docs[0].gold, 1);
    fx_free(&f);

    ASSERT_EQ_INT(fx_load(&f, "tasks", "arc_challenge", bench, 0), 0);
    ASSERT_EQ_INT(f.td.n_docs, 1172);
    c = fx_context(&f, 0, 0);
    ASSERT_EQ_STR(c, "Question: An astronomer observes that a planet rotates faster after a meteorite "
                     "impact. Which is the most likely effect of this increase in rotation?\nAnswer:");
    qs_free(c);
    ASSERT_EQ_STR(f.td.docs[0].choices[0], "Planetary density will decrease.");
    ASSERT_EQ_INT(f.td.docs[0].gold, 2);
    ASSERT_EQ_INT(prompt_utf8_len(f.td.docs[0].choices[0]), 32);
    fx_free(&f);
}
