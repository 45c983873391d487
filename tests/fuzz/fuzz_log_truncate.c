/* fuzz_log_truncate.c: the resume-time log truncation scanner.  The input, with
 * a resume step taken from its first byte, as metrics.jsonl / events.jsonl ->
 * trainer_log_truncate (plain or zstd, line by line), and as quant.jsonl.zst ->
 * the quantizer log's resume cut (qlog_writer_create with a resume step: frames
 * kept, re-compressed or dropped; the header compared with the run's own). */
#include "fuzz.h"
#include "qs/qlog.h"
#include "qs/trainer_test.h"

int fuzz_log_truncate(const uint8_t *data, size_t size)
{
    long step = size ? data[0] % 8 : 0;
    char dir[512], path[600];
    if (fuzz_subdir(dir, sizeof dir, "ltrun"))
        return 0;
    qs_diag d = {0};
    snprintf(path, sizeof path, "%s/events.jsonl", dir);
    if (fuzz_file_write(path, data, size) == 0)
        trainer_log_truncate(path, step, &d);
    snprintf(path, sizeof path, "%s/quant.jsonl.zst", dir);
    if (fuzz_file_write(path, data, size) == 0) {
        static const char *const names[2] = {"blk1.mlp.gate_proj.input", "blk1.mlp.gate_proj.weight"};
        quant_recipe r;
        quant_recipe_default(&r);
        qlog_writer *w = NULL;
        if (qlog_writer_create(&w, path, "fz", &r, names, 2, step, &d) == 0)
            qlog_writer_close(w, &d);
    }
    fuzz_dir_remove(dir);
    return 0;
}
