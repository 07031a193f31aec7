/* io.h — checked file I/O: whole-file reads, atomic writes (temp file, fsync, rename, fsync the
 * folder), folder helpers, and the safetensors reader/writer with a CRC32C per tensor. */
#ifndef GPTC_IO_H
#define GPTC_IO_H

#include "core/core.h"

/* ---- files */
/* Writes the concatenation of nparts buffers to path atomically: path.tmp-PID, fsync, rename over
 * path, fsync the folder. On any failure the old file (if any) is untouched and the temp removed. */
gptc_status gptc_file_write_atomic(const char *path, const void *const *parts, const size_t *lens, int nparts);
/* The same in pieces, for output too large to hold: open creates path.tmp-PID, write appends,
 * commit syncs, renames over path and syncs the folder; abort removes the temp. A failed write or
 * commit has already removed the temp and released f (the message names path and the step). */
typedef struct gptc_atomic_file {
    const char *path; /* not copied: must outlive f */
    char *tmp;
    int fd;
} gptc_atomic_file;
gptc_status gptc_atomic_open(gptc_atomic_file *f, const char *path);
gptc_status gptc_atomic_write(gptc_atomic_file *f, const void *buf, size_t n);
gptc_status gptc_atomic_commit(gptc_atomic_file *f);
void gptc_atomic_abort(gptc_atomic_file *f);
/* Reads a whole file into a gptc_alloc buffer, released with gptc_free (NUL-terminated, *len excludes the NUL). */
gptc_status gptc_file_read_all(const char *path, char **data, size_t *len);
/* Reads path as one JSON object: *out (the caller cJSON_Deletes it); a file that is empty or not a JSON
 * object gives *out NULL and *why the reason ("file is empty", "not a JSON object") with GPTC_OK, for the
 * caller to name in its own words; an unreadable file is gptc_file_read_all's error. */
struct cJSON;
gptc_status gptc_json_object_read(const char *path, struct cJSON **out, const char **why);
/* Copies file `from` to `to` (written atomically). */
gptc_status gptc_file_copy(const char *from, const char *to);
/* Drops the resident pages of data[0..n) inside a read-only private mapping map[0..map_size) (they
 * are read again from the file if touched): readers that copy a mapped file piece by piece call it
 * after each piece, so the file's size is not added to the process's resident memory. */
void gptc_mapped_release(const void *map, size_t map_size, const void *data, size_t n);
/* Creates a folder and its parents (like mkdir -p). */
gptc_status gptc_mkdir_p(const char *path);
/* fsyncs a folder (after a rename inside it). */
gptc_status gptc_fsync_dir(const char *path);
/* Removes a folder and everything in it (for pruning old checkpoints); links are removed, not
 * followed. A missing folder is not an error; a path that is not a folder is GPTC_ERR_ARG. */
gptc_status gptc_remove_tree(const char *path);
bool gptc_is_dir(const char *path);
bool gptc_is_file(const char *path);

/* ---- safetensors: 8-byte little-endian header length N, N bytes of JSON, then raw tensor data.
 * The JSON maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative
 * to the end of the header) plus an optional "__metadata__" map of string to string.
 * gptc writes "crc32c.<tensor name>" = 8 hex digits into the metadata for every tensor and checks
 * it on open when present. */

typedef enum gptc_dtype { GPTC_F32, GPTC_F64, GPTC_BF16, GPTC_F16, GPTC_I32, GPTC_I64, GPTC_U16, GPTC_U8 } gptc_dtype;
const char *gptc_dtype_name(gptc_dtype t);           /* "F32", ... as in safetensors */
size_t gptc_dtype_size(gptc_dtype t);

#define GPTC_ST_MAX_DIMS 8

typedef struct gptc_st_tensor {
    char *name;
    gptc_dtype dtype;
    int ndim;
    int64_t shape[GPTC_ST_MAX_DIMS];
    size_t numel;
    size_t nbytes;
    const void *data; /* points into the mapped file; aligned to the element size in files that gptc
                       * (or Hugging Face's writer) made, but a foreign file may misalign it */
} gptc_st_tensor;

typedef struct gptc_st_file {
    char *path;
    void *map;
    size_t map_size;
    gptc_st_tensor *tensors;
    int ntensors;
    char **meta_keys, **meta_vals;
    int nmeta;
} gptc_st_file;

/* Maps and validates a safetensors file: header length within the file, JSON well formed, known
 * dtypes, shape product × dtype size == offsets span, offsets inside the data, no two tensors
 * overlapping, the data region fully covered, and every crc32c.<name> in the metadata matching.
 * Any violation is GPTC_ERR_FORMAT with the path and the reason. The checksums of a file this process
 * verified before are not read again while the file is the same one, unchanged (device, inode, size,
 * modification and status-change times; only files changed at least a second before their check). */
gptc_status gptc_st_open(gptc_st_file *f, const char *path);
/* The same without reading the tensors' bytes: every check but the checksums, so its names, shapes
 * and metadata can be trusted, its data not. For probes that size or describe a model before the
 * load that verifies it (a 124M checkpoint's checksums cost a pass over 0.5 GB). */
gptc_status gptc_st_open_header(gptc_st_file *f, const char *path);
/* Drops the resident pages of tensor t's bytes (they are read again from the file if touched): a
 * reader that copies tensor by tensor calls it after each, so a file of N bytes never adds N to the
 * process's resident memory (checkpoints are the size of the model and its moments). */
void gptc_st_release(const gptc_st_file *f, const gptc_st_tensor *t);
void gptc_st_close(gptc_st_file *f);
const gptc_st_tensor *gptc_st_find(const gptc_st_file *f, const char *name);
const char *gptc_st_meta(const gptc_st_file *f, const char *key); /* NULL if absent */

typedef struct gptc_st_entry {
    const char *name;
    gptc_dtype dtype;
    int ndim;
    int64_t shape[GPTC_ST_MAX_DIMS];
    const void *data; /* numel × dtype size bytes */
} gptc_st_entry;

/* Writes a safetensors file atomically (via gptc_file_write_atomic) with the given metadata
 * (parallel arrays of keys and values) plus a crc32c.<name> entry per tensor. The header is padded
 * with spaces so that the data starts at a multiple of 64 bytes; the tensors follow back to back
 * (the format allows no holes), wider dtypes first and otherwise in the order given, so each one
 * starts at a multiple of its element size. Names must be unique; keys starting "crc32c." are
 * reserved. */
gptc_status gptc_st_write(const char *path, const gptc_st_entry *entries, int n,
                          const char *const *meta_keys, const char *const *meta_vals, int nmeta);

#endif
