/* safetensors.h: Hugging Face .safetensors files, read (mmap + validation) and
 * written (atomic), plus the sharded directory form (model.safetensors.index.json).
 *
 * File layout: u64 little-endian header length H, H bytes of JSON
 *   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"k": "v"}}
 * then the data section; offsets are relative to its start.
 *
 * Contract of safetensors_open: nothing is trusted before it is checked.  The
 * header length, the JSON, every tensor's dtype, shape, byte size
 * (= product(shape) * dtype size, overflow-checked) and offsets are validated
 * against the file size; tensors may not overlap.  Errors name the file, the
 * tensor and what was expected vs found.  Tensor data is read through the
 * mapping only after this check.
 */
#ifndef QS_SAFETENSORS_H
#define QS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"
#include "qs/fileio.h"

/* Every dtype the format defines (parsed and size-checked); only F32, BF16
 * and F16 convert to fp32.  Order is internal, never written to disk. */
enum {
    SAFETENSORS_F32 = 0,
    SAFETENSORS_BF16,
    SAFETENSORS_F16,
    SAFETENSORS_F64,
    SAFETENSORS_I64,
    SAFETENSORS_I32,
    SAFETENSORS_I16,
    SAFETENSORS_I8,
    SAFETENSORS_U8,
    SAFETENSORS_BOOL,
    SAFETENSORS_F8_E4M3,
    SAFETENSORS_F8_E5M2,
    SAFETENSORS_DTYPE_COUNT
};
#define SAFETENSORS_MAX_DIMS 8
/* Refuse headers above this (the format's own reference loader caps at 100 MB). */
#define SAFETENSORS_MAX_HEADER_BYTES ((uint64_t)100 * 1000 * 1000)

const char *safetensors_dtype_name(int dtype);
size_t safetensors_dtype_bytes(int dtype);

typedef struct safetensors_tensor {
    char *name;
    int dtype;
    int ndim;
    int64_t shape[SAFETENSORS_MAX_DIMS];
    size_t n_elems;
    const unsigned char *data;   /* into the mapping; n_bytes long */
    size_t n_bytes;
} safetensors_tensor;

typedef struct safetensors_file {
    char *path;
    fileio_map map;
    safetensors_tensor *tensors;   /* [n_tensors], sorted by data offset */
    int n_tensors;
} safetensors_file;

/* Map and validate.  Zero-initialise f; safetensors_close is safe on a zeroed f. */
int safetensors_open(safetensors_file *f, const char *path, qs_diag *d);
void safetensors_close(safetensors_file *f);
const safetensors_tensor *safetensors_find(const safetensors_file *f, const char *name);
/* t's shape as diags write it ("[5632, 2048]", "[]") into buf (cut to fit). */
void safetensors_shape_str(const safetensors_tensor *t, char *buf, size_t buf_bytes);

/* Convert a tensor (F32/BF16/F16) into out[n_elems] fp32.  Fails on another
 * dtype (QS_EUNSUPPORTED) and on any NaN/Inf value (QS_ENAN, naming the tensor
 * and the element index).  path is only used in diagnostics. */
int safetensors_tensor_to_f32(const safetensors_tensor *t, float *out, const char *path,
                              qs_diag *d);
/* The same for I32 tensors (fixtures store token ids that way). */
int safetensors_tensor_to_i32(const safetensors_tensor *t, int32_t *out, const char *path,
                              qs_diag *d);

/* A model directory's weights: one model.safetensors, or the shards listed by
 * model.safetensors.index.json (every shard validated; every weight_map entry
 * must exist in the shard it names). */
typedef struct safetensors_dir {
    safetensors_file *files;
    int n_files;
} safetensors_dir;
int safetensors_dir_open(safetensors_dir *sd, const char *dir, qs_diag *d);
void safetensors_dir_close(safetensors_dir *sd);
/* Finds name in any shard; *file (may be NULL) gets the shard's path. */
const safetensors_tensor *safetensors_dir_find(const safetensors_dir *sd, const char *name,
                                               const char **file);

/* Writer: fp32 tensors stored as F32 or BF16 (round to nearest even).
 * Written to PATH.tmp.<pid> and renamed only when complete. */
typedef struct safetensors_entry {
    const char *name;
    const float *data;
    int ndim;
    int64_t shape[SAFETENSORS_MAX_DIMS];
} safetensors_entry;
/* meta_kv: NULL or {key, value, key, value, ..., NULL} strings for "__metadata__". */
int safetensors_write(const char *path, const safetensors_entry *entries, int n_entries,
                      int dtype, const char *const *meta_kv, qs_diag *d);

/* The same file written piece by piece, so memory does not grow with the
 * tensors: create writes the header from entries (their data unused), append
 * takes the next n values in entry order (crossing tensor boundaries freely;
 * the tensors lie back to back, as Hugging Face's reader requires), commit checks that every declared value arrived, then
 * renames (and frees s, also on failure); abort removes the temp file
 * (NULL ok).  Same bytes as safetensors_write for the same values. */
typedef struct safetensors_stream safetensors_stream;
int safetensors_stream_create(safetensors_stream **s, const char *path,
                              const safetensors_entry *entries, int n_entries, int dtype,
                              const char *const *meta_kv, qs_diag *d);
int safetensors_stream_append(safetensors_stream *s, const float *x, size_t n, qs_diag *d);
/* Tensors of several dtypes in one file: dtypes[i] (F32, BF16 or U8) for
 * entries[i]; F32/BF16 tensors take fp32 values (append), U8 tensors bytes
 * stored as they are (append_u8), each in entry order. */
int safetensors_stream_create_mixed(safetensors_stream **s, const char *path,
                                    const safetensors_entry *entries, const int *dtypes,
                                    int n_entries, const char *const *meta_kv, qs_diag *d);
int safetensors_stream_append_u8(safetensors_stream *s, const uint8_t *x, size_t n, qs_diag *d);
int safetensors_stream_commit(safetensors_stream *s, qs_diag *d);
void safetensors_stream_abort(safetensors_stream *s);

/* Scalar conversions (exported for the writer and tests). */
float safetensors_bf16_to_f32(uint16_t h);
uint16_t safetensors_f32_to_bf16(float f);   /* round to nearest even; NaN stays NaN */
float safetensors_f16_to_f32(uint16_t h);

#endif
