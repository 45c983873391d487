/* qlog.h: RUN_DIR/quant.jsonl.zst, the per-step quantizer log (layout v1).
 *
 * zstd-compressed JSON lines (zlog), one frame flushed per logged step, so a
 * crashed run keeps every complete step and `zstdcat | jq` reads the file:
 *   {"v":1,"type":"header","run":NAME,"recipe":{"estimator":"max-window:64",
 *    "margin":0,"history":1024,"saturate":true},"quantizers":[NAMES...]}
 *   {"v":1,"type":"step","step":N,"phase":"warmup"|"qat","q":[{"name":..,
 *    "mode":"observe"|"quant"|"none","est":..,"pred_amax":..,"amax":..,"scale":..,
 *    "n":..,"clip":..,"clip_rate":..,"under":..,"under_rate":..,"qsnr_db":..}, ...]}
 * One "q" entry per quantizer in header order.  Any number may be null (not
 * computed); readers accept null (the rules readers apply: below).  A resume cuts the log back to the steps
 * before the checkpoint (qlog_writer_create); logs of older versions repeat the
 * header after a resume, and a step number that goes back replaces the records
 * from that step on: readers still accept both.  "mode":"none" (quantizer not called
 * that step, all figures null) extends the run-dir contract (README "## File formats").
 *
 * Checklist for a new field: bump QLOG_VERSION, write it in qlog_write_step,
 * read it in qlog.c's row parser, document it in README.md, add it to test_qlog.c.
 */
#ifndef QS_QLOG_H
#define QS_QLOG_H

#include <stddef.h>

#include "qs/amax.h"
#include "qs/err.h"
#include "qs/json.h"
#include "qs/quant.h"

#define QLOG_VERSION 1
#define QLOG_FILE "quant.jsonl.zst"
#define QLOG_EST_MAX 16    /* distinct estimator names a reader keeps */

enum { QLOG_PHASE_WARMUP = 0, QLOG_PHASE_QAT = 1 };

/* One quantizer in one step, as logged.  NaN / -1 = null. */
typedef struct qlog_row {
    int mode;            /* QUANT_MODE_* (NONE when absent or "none") */
    int est_idx;         /* index into qlog_run.est_names, -1 if null */
    float pred_amax, amax, scale;
    float clip_rate, under_rate, qsnr_db;
    long long n, clip, under;
} qlog_row;

/* Rows for one step from the quantizer records (derives rates and QSNR).
 * est_idx is 0 (the recipe estimator) or 1 ("current", on a fallback). */
void qlog_row_from_record(const quant_record *rec, qlog_row *row);

/* A finite float as JSON text with 9 significant digits (reads back to the same
 * float, like %.9g, but without printf); non-finite -> "null".  buf >= 24 bytes;
 * returns the length. */
int qlog_float_format(char *buf, float f);

typedef struct qlog_writer qlog_writer;

/* resume_step < 0: a new log (an existing file is replaced).  resume_step >= 0:
 * resuming at that step: the existing log is first cut back to its header(s) and
 * the records of earlier steps (zlog_filter: frames kept byte for byte, a frame
 * cut by a kill dropped), then appended to; the header is written again only when
 * the kept log does not start with exactly this header (e.g. the run dir was
 * renamed), so a resumed log decompresses to the same bytes as an uninterrupted one. */
int qlog_writer_create(qlog_writer **out, const char *path, const char *run_name,
                       const quant_recipe *r, const char *const *names, int n_quant,
                       long resume_step, qs_diag *d);
/* One step line + zstd frame + fflush.  rows[0..n_quant), header order. */
int qlog_write_step(qlog_writer *w, long step, int phase, const qlog_row *rows, qs_diag *d);
int qlog_writer_close(qlog_writer *w, qs_diag *d);   /* flush and free */
void qlog_writer_destroy(qlog_writer *w);            /* abandon; NULL ok */

/* A whole log in arrays. */
typedef struct qlog_run {
    int version;
    char run[128];
    char recipe_est[AMAX_NAME_MAX];
    int margin, history_steps, saturate;
    int n_quant;
    char **names;                        /* [n_quant] */
    int n_est;
    char est_names[QLOG_EST_MAX][AMAX_NAME_MAX];
    int n_steps;
    long *steps;                         /* [n_steps] */
    int *phases;                         /* [n_steps] QLOG_PHASE_* */
    qlog_row *rows;                      /* [n_steps * n_quant], step-major */
    int truncated;                       /* 1: the file ended inside a record */
    unsigned char *seen;                 /* [n_quant] scratch: names met in one step record */
} qlog_run;

/* Which logged steps an analysis (satstat, replay) scores: "qat" (default),
 * "warmup" or "all". */
enum { QLOG_SELECT_QAT = 0, QLOG_SELECT_WARMUP = 1, QLOG_SELECT_ALL = 2 };
int qlog_select_parse(const char *name, int *select, qs_diag *d);
const char *qlog_select_name(int select);
static inline int qlog_step_selected(const qlog_run *run, int step_idx, int select)
{
    return select == QLOG_SELECT_ALL ||
           (select == QLOG_SELECT_QAT) == (run->phases[step_idx] == QLOG_PHASE_QAT);
}

/* ---- One record at a time: the rules every reader of the log applies (qlog_read
 * behind satstat and replay, and heatmap's reader), so they accept and refuse the
 * same records with the same one-line error:
 *  - every record has "v" = QLOG_VERSION and a string "type" (types other than
 *    header and step are skipped);
 *  - a header has a "recipe" object and a non-empty "quantizers" list; a repeated
 *    header lists the same names;
 *  - a step has an integer "step" >= 0, a "q" array of objects each with a "name" from
 *    the header (any order; quantizers left out: mode none, figures null), "phase"
 *    "warmup", "qat" or null (warmup), "mode" "quant", "observe", "none" or null
 *    (none), "est" a string or null;
 *  - each float is null (not measured) or in its range (qlog_float_ok): amaxes
 *    >= 0, scale > 0, rates in [0, 1], QSNR finite, all finite as fp32; the counts
 *    n/clip/under are null or integers >= 0, clip and under at most n when both
 *    are given (they count elements of the tensor's n).
 * o is a parsed line (qs_json_root with the file and line): errors name both. */
enum { QLOG_REC_OTHER = 0, QLOG_REC_HEADER = 1, QLOG_REC_STEP = 2 };
int qlog_record_kind(const qs_json_at *o, int *kind, qs_diag *d);
/* A header into run (names and recipe; a repeat is checked against them). */
int qlog_header_parse(qlog_run *run, const qs_json_at *o, qs_diag *d);
/* A step record into *step, *phase (QLOG_PHASE_*) and rows[run->n_quant], header
 * order; needs the header first.  run is only written to record estimator names. */
int qlog_step_parse(qlog_run *run, const qs_json_at *o, long *step, int *phase, qlog_row *rows,
                    qs_diag *d);
/* The error for a log without a (complete) header line. */
int qlog_header_missing(const char *path, int truncated, qs_diag *d);
/* Logged floats and counts of a q entry by key (key[0..len)): index, or -1. */
enum { QLOG_F_PRED_AMAX, QLOG_F_AMAX, QLOG_F_SCALE, QLOG_F_CLIP_RATE, QLOG_F_UNDER_RATE,
       QLOG_F_QSNR_DB, QLOG_F_COUNT };
enum { QLOG_C_N, QLOG_C_CLIP, QLOG_C_UNDER, QLOG_C_COUNT };
int qlog_float_field(const char *key, size_t len);
int qlog_count_field(const char *key, size_t len);
/* 1 when a logged (non-null) value x of float `field` is accepted. */
int qlog_float_ok(int field, double x);

/* ---- The value rules of a step record, in one place for every reader.
 * qlog_step_parse reads a record's JSON types and hands the values to these two;
 * heatmap's fast scanner (plots/heatmap_scan.c) hands them the values it scanned
 * and judges none itself, so the two paths cannot accept different records.  They
 * word the error on `at` (the record, or the q entry) when d is given; the scanner
 * passes at and d NULL (it hands a refused line to the Jansson path to word). */
/* A step number and phase (NULL: null or absent) -> *phase_out (QLOG_PHASE_*). */
int qlog_step_check(const qs_json_at *at, long long step, const char *phase, size_t phase_len,
                    int *phase_out, qs_diag *d);
/* One q entry's values as read, not yet judged. */
typedef struct qlog_entry_in {
    const char *mode;                  /* NULL: null or absent */
    size_t mode_len;
    double f[QLOG_F_COUNT];            /* NaN: null or absent */
    long long c[QLOG_C_COUNT];         /* any integer as logged */
    unsigned char c_given[QLOG_C_COUNT];   /* 0: null or absent */
} qlog_entry_in;
void qlog_entry_in_init(qlog_entry_in *in);   /* everything null */
/* The entry of quantizer `name` in step `step` (both for the message) -> *row
 * (est_idx -1: the caller's). */
int qlog_entry_check(const qs_json_at *at, long long step, const char *name,
                     const qlog_entry_in *in, qlog_row *row, qs_diag *d);

/* Parse a log.  0, or QS_ETRUNC with every complete record in *run and the cut
 * described in d (callers keep the data and report it), or another error (then
 * *run is freed).  Always call qlog_run_free. */
int qlog_read(const char *path, qlog_run *run, qs_diag *d);
/* Same, given a run directory (reads RUN_DIR/quant.jsonl.zst) or a log file;
 * the path read goes to path_out (may be NULL). */
int qlog_read_run(const char *run_dir_or_file, qlog_run *run, char *path_out, size_t path_bytes,
                  qs_diag *d);
/* Keep only the quantizers whose name contains substr (e.g. ".input"), in place.
 * QS_ENOTFOUND (run unchanged) if none matches. */
int qlog_run_filter(qlog_run *run, const char *substr, qs_diag *d);
void qlog_run_free(qlog_run *run);                  /* safe on a zeroed run */
static inline const qlog_row *qlog_run_row(const qlog_run *run, int step_idx, int q)
{
    return &run->rows[(size_t)step_idx * (size_t)run->n_quant + (size_t)q];
}

#endif
