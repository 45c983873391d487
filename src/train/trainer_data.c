/* trainer_data.c: the token-shard data source of the trainer (train_data over
 * a dataloader; the position is saved as the dataloader_pos struct's fields). */
#include <string.h>

#include "qs/dataloader.h"
#include "qs/mem.h"
#include "qs/tokenizer.h"
#include "qs/trainer.h"

static int trainer_data_next(void *self, int32_t *tokens, int32_t *targets, int B, int T,
                             qs_diag *d)
{
    (void)B;
    (void)T;
    (void)d;
    dataloader_next(self, tokens, targets);
    return 0;
}

static int trainer_data_save(void *self, void **bytes, size_t *n, qs_diag *d)
{
    dataloader_pos pos;
    dataloader_pos_get(self, &pos);
    uint64_t v[4] = {pos.epoch, pos.cursor, pos.n_windows, pos.data_hash};
    *bytes = qs_malloc(sizeof v);
    if (!*bytes)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    memcpy(*bytes, v, sizeof v);
    *n = sizeof v;
    return 0;
}

static int trainer_data_restore(void *self, const void *bytes, size_t n, qs_diag *d)
{
    uint64_t v[4];
    if (n != sizeof v)
        return diag_set(d, QS_EFORMAT, NULL, -1, "data position: expected %zu bytes, found %zu",
                        sizeof v, n);
    memcpy(v, bytes, sizeof v);
    dataloader_pos pos = {v[0], v[1], v[2], v[3]};
    return dataloader_pos_set(self, &pos, d);
}

int trainer_data_open_shards(train_data *out, const runcfg *cfg, qs_diag *d)
{
    memset(out, 0, sizeof *out);
    tokenizer *tok;
    int rc = tokenizer_create(&tok, cfg->model, d);
    if (rc)
        return rc;
    dataloader_opts o = {(int)cfg->batch_size, (int)cfg->seq_len, (uint64_t)cfg->seed, 1,
                         tokenizer_vocab_size(tok)};
    uint64_t hash = tokenizer_hash(tok);
    tokenizer_destroy(tok);
    dataloader *dl;
    if ((rc = dataloader_create(&dl, cfg->train_data, "train", hash, &o, d)))
        return rc;
    *out = (train_data){dl, trainer_data_next, trainer_data_save, trainer_data_restore};
    return 0;
}

void trainer_data_close(train_data *data)
{
    dataloader_destroy(data->self);
    memset(data, 0, sizeof *data);
}
