/* safetensors_dir.c: a model directory's weights, single file or sharded.
 *
 * DIR/model.safetensors wins when present; otherwise DIR/model.safetensors.index.json
 * {"metadata": {...}, "weight_map": {"tensor": "shard file", ...}} names the shards.
 * Every shard is opened (and so validated) once; every weight_map entry must be
 * found in the shard it names, and shard names may not leave the directory.
 */
#include <jansson.h>
#include <string.h>

#include "qs/mem.h"
#include "qs/safetensors.h"

static int sdir_add(safetensors_dir *sd, const char *path, qs_diag *d)
{
    for (int i = 0; i < sd->n_files; i++)
        if (!strcmp(sd->files[i].path, path))
            return 0;
    safetensors_file *nf = qs_realloc(sd->files, (size_t)(sd->n_files + 1) * sizeof *nf);
    if (!nf)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    sd->files = nf;
    int rc = safetensors_open(&sd->files[sd->n_files], path, d);
    if (rc)
        return rc;
    sd->n_files++;
    return 0;
}

static int sdir_open_index(safetensors_dir *sd, const char *dir, const char *index_path,
                           qs_diag *d)
{
    json_error_t je;
    json_t *root = json_load_file(index_path, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return diag_set(d, QS_EFORMAT, index_path, je.line, "invalid JSON: %s", je.text);
    int rc = 0;
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(wm) || json_object_size(wm) == 0) {
        rc = diag_set(d, QS_EFORMAT, index_path, -1, "expected a non-empty object 'weight_map'");
        goto done;
    }
    const char *name;
    json_t *v;
    json_object_foreach(wm, name, v)
    {
        const char *shard = json_string_value(v);
        if (!shard || !shard[0] || strchr(shard, '/') || !strcmp(shard, "..")) {
            rc = diag_set(d, QS_EFORMAT, index_path, -1,
                          "weight_map['%s']: expected a file name in the same directory", name);
            goto done;
        }
        char path[4096];
        if (fileio_join(path, sizeof path, dir, shard)) {
            rc = diag_set(d, QS_ERANGE, index_path, -1, "shard path too long");
            goto done;
        }
        rc = sdir_add(sd, path, d);
        if (rc)
            goto done;
        const safetensors_file *f = NULL;
        for (int i = 0; i < sd->n_files; i++)
            if (!strcmp(sd->files[i].path, path))
                f = &sd->files[i];
        if (!f || !safetensors_find(f, name)) {
            rc = diag_set(d, QS_ENOTFOUND, path, -1,
                          "tensor '%s' listed in %s is missing from this shard", name,
                          "model.safetensors.index.json");
            goto done;
        }
    }
done:
    json_decref(root);
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
        rc = sdir_add(sd, path, d);
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
