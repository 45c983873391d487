/* safetensors_dir.c: a model directory's weights, single file or sharded.
 *
 * DIR/model.safetensors wins when present; otherwise DIR/model.safetensors.index.json
 * {"metadata": {...}, "weight_map": {"tensor": "shard file", ...}} names the shards.
 * Every shard is opened (and so validated) once; every weight_map entry must be
 * found in the shard it names, shard names may not leave the directory, and no
 * tensor may be stored in two shards.
 */
#include <jansson.h>
#include <string.h>

#include "qs/json.h"
#include "qs/mem.h"
#include "qs/safetensors.h"

/* Opens path once (a shard named twice is the same file); *f (may be NULL) gets it. */
static int sdir_add(safetensors_dir *sd, const char *path, const safetensors_file **f,
                    qs_diag *d)
{
    for (int i = 0; i < sd->n_files; i++)
        if (!strcmp(sd->files[i].path, path)) {
            if (f)
                *f = &sd->files[i];
            return 0;
        }
    safetensors_file *nf = qs_realloc(sd->files, (size_t)(sd->n_files + 1) * sizeof *nf);
    if (!nf)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    sd->files = nf;
    int rc = safetensors_open(&sd->files[sd->n_files], path, d);
    if (rc)
        return rc;
    if (f)
        *f = &sd->files[sd->n_files];
    sd->n_files++;
    return 0;
}

/* One weight_map entry: the shard must be a file of dir, and hold the tensor. */
static int sdir_map_entry(safetensors_dir *sd, const char *dir, const qs_json_at *wm,
                          const char *name, qs_diag *d)
{
    const char *shard;
    int rc = qs_json_str(wm, name, &shard, d);
    if (rc)
        return rc;
    if (!shard[0] || strchr(shard, '/') || !strcmp(shard, ".."))
        return qs_json_fail(wm, name, QS_EFORMAT, d,
                            "expected a file name in the same directory, found '%s'", shard);
    char path[4096];
    if (fileio_join(path, sizeof path, dir, shard))
        return diag_set(d, QS_ERANGE, wm->file, -1, "shard path too long");
    const safetensors_file *f;
    if ((rc = sdir_add(sd, path, &f, d)))
        return rc;
    if (!safetensors_find(f, name))
        return diag_set(d, QS_ENOTFOUND, path, -1,
                        "tensor '%s' listed in %s is missing from this shard", name,
                        "model.safetensors.index.json");
    return 0;
}

static int sdir_open_index(safetensors_dir *sd, const char *dir, const char *index_path,
                           qs_diag *d)
{
    json_t *root;
    int rc = qs_json_load_file(index_path, QS_JSON_NO_DUPLICATES | QS_JSON_OBJECT, &root, d);
    if (rc)
        return rc;
    qs_json_at r = qs_json_root(root, index_path, -1), wm = {0};
    if (!(rc = qs_json_obj(&r, "weight_map", &wm, d)) && json_object_size(wm.v) == 0)
        rc = qs_json_fail(&wm, NULL, QS_EFORMAT, d, "expected a non-empty object");
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)wm.v, name, v)
    {
        if (rc || (rc = sdir_map_entry(sd, dir, &wm, name, d)))
            break;
    }
    json_decref(root);
    /* one copy per tensor: lookups search the shards in order, so a second
     * copy would be read from whichever shard came first, not the mapped one */
    for (int i = 1; !rc && i < sd->n_files; i++)
        for (int k = 0; !rc && k < sd->files[i].n_tensors; k++)
            for (int j = 0; !rc && j < i; j++) {
                const char *t = sd->files[i].tensors[k].name, *a = sd->files[j].path,
                           *b = sd->files[i].path;
                if (safetensors_find(&sd->files[j], t))
                    rc = diag_set(d, QS_EFORMAT, index_path, -1,
                                  "tensor '%s' is stored in two shards, %s and %s", t,
                                  strrchr(a, '/') ? strrchr(a, '/') + 1 : a,
                                  strrchr(b, '/') ? strrchr(b, '/') + 1 : b);
            }
    return rc;
}

int safetensors_dir_open(safetensors_dir *sd, const char *dir, qs_diag *d)
{
    memset(sd, 0, sizeof *sd);
    char path[4096];
    if (fileio_join(path, sizeof path, dir, "model.safetensors"))
        return diag_set(d, QS_ERANGE, dir, -1, "path too long");
    int rc;
    if (fileio_exists(path)) {
        rc = sdir_add(sd, path, NULL, d);
    } else {
        if (fileio_join(path, sizeof path, dir, "model.safetensors.index.json"))
            return diag_set(d, QS_ERANGE, dir, -1, "path too long");
        if (!fileio_exists(path))
            return diag_set(d, QS_ENOTFOUND, dir, -1,
                            "no model.safetensors or model.safetensors.index.json in this "
                            "directory");
        rc = sdir_open_index(sd, dir, path, d);
    }
    if (rc)
        safetensors_dir_close(sd);
    return rc;
}

void safetensors_dir_close(safetensors_dir *sd)
{
    for (int i = 0; i < sd->n_files; i++)
        safetensors_close(&sd->files[i]);
    qs_free(sd->files);
    memset(sd, 0, sizeof *sd);
}

const safetensors_tensor *safetensors_dir_find(const safetensors_dir *sd, const char *name,
                                               const char **file)
{
    for (int i = 0; i < sd->n_files; i++) {
        const safetensors_tensor *t = safetensors_find(&sd->files[i], name);
        if (t) {
            if (file)
                *file = sd->files[i].path;
            return t;
        }
    }
    return NULL;
}
