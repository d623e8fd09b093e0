/* nobubble: checkpoints. safetensors files (docs/checkpoints.md) written atomically
 * and read with full validation, and the Hugging Face export of a model (model.safetensors +
 * config.json for LlamaForCausalLM) with its import. See docs/checkpoints.md. */
#ifndef NOBUBBLE_CHECKPOINT_H
#define NOBUBBLE_CHECKPOINT_H
#include <stddef.h>
#include <stdint.h>
#include "nobubble/common.h"
#include "nobubble/model.h"

/* ---- writing ---- */
#define NB_ST_WRITE_MAX_DIMS 4
typedef struct nb_st_tensor {
    const char *name;                      /* unique, non-empty, not "__metadata__" */
    int ndim;                              /* 0 (a scalar) .. 4 */
    int64_t shape[NB_ST_WRITE_MAX_DIMS];   /* each >= 0 */
    const float *data;                     /* prod(shape) floats, row-major */
} nb_st_tensor;

/* The metadata key of a tensor's checksum: NB_ST_CHECKSUM_KEY "<tensor name>", its value
 * NB_ST_CHECKSUM_ALGO "<16 lowercase hex digits>" (nb_st_checksum, XXH3 64-bit with seed 0, of the
 * tensor's bytes in the file). Files written before XXH3 name "nbh64:" (NB_ST_CHECKSUM_ALGO_OLD),
 * nobubble's own hash; the reader verifies either, by the name the value carries. */
#define NB_ST_CHECKSUM_KEY "nobubble.checksum:"
#define NB_ST_CHECKSUM_ALGO "xxh3:"
#define NB_ST_CHECKSUM_ALGO_OLD "nbh64:"
typedef enum { NB_ST_XXH3, NB_ST_NBH64 } nb_st_algo;
/* The metadata key of the header's checksum: NB_ST_CHECKSUM_ALGO "<16 hex digits>", XXH3 of the header's
 * content in a canonical form (every other metadata pair, sorted by key; every tensor's name, dtype, shape
 * and offsets, sorted by name; docs/checkpoints.md), so that a damaged byte in a metadata value that still
 * parses (a run's learning rate, a step) or in an entry is refused, not read. Files without it (written
 * before it, or by other tools) are read as before. */
#define NB_ST_HEADER_CHECKSUM_KEY "nobubble.header_checksum"

/* Writes path as safetensors: every tensor as F32, contiguous from 0 in the order given, and
 * "__metadata__": {"format": "pt"} plus n_meta extra string pairs (meta[2k] = key, meta[2k+1] =
 * value; a key may not be "format", NB_ST_HEADER_CHECKSUM_KEY nor begin with NB_ST_CHECKSUM_KEY; meta
 * may be NULL when n_meta is 0), then each tensor's checksum, then the header's. Atomic: a temporary
 * file in the same folder, flushed and fsync'ed, renamed over path, then the folder fsync'ed;
 * on failure path is untouched (a previous file stays as it was) and the temporary removed. */
int nb_st_write(const char *path, const nb_st_tensor *tensors, int n, const char *const *meta, int n_meta);

/* ---- reading ---- */
typedef enum { NB_ST_F32, NB_ST_F16, NB_ST_BF16 } nb_st_dtype;
#define NB_ST_MAX_DIMS 8
#define NB_ST_MAX_HEADER 100000000ULL   /* 100 MB, as Hugging Face's reader */

typedef struct nb_st_entry {
    char *name;
    nb_st_dtype dtype;
    int ndim;
    int64_t shape[NB_ST_MAX_DIMS];
    size_t numel;
    uint64_t begin, end;   /* byte offsets from the start of the tensor bytes */
    int has_checksum;      /* the file's metadata holds one for this tensor (files nobubble writes) */
    nb_st_algo checksum_algo;   /* the algorithm the value names */
    uint64_t checksum;
} nb_st_entry;

typedef struct nb_st_file {
    char *path;
    int fd;
    uint64_t file_size, header_len, data_start;   /* data_start = 8 + header_len */
    int n;
    nb_st_entry *entries;  /* in the header's order */
    nb_st_entry **by_name_;   /* private: the entries sorted by name, for nb_st_find */
    int n_meta;
    char **meta_keys, **meta_values;
} nb_st_file;

/* Opens and validates path: the header length (within the file, at most 100 MB), the JSON,
 * each entry (dtype F32, F16 or BF16; shape; data_offsets matching dtype x shape), no
 * duplicate names, offsets contiguous from 0 to the end of the file without gaps or overlaps,
 * checksums well-formed, and the header's checksum where the file has one.
 * Errors name the file and the problem. The file stays open until nb_st_close. */
int nb_st_open(const char *path, nb_st_file *f);
void nb_st_close(nb_st_file *f);
const nb_st_entry *nb_st_find(const nb_st_file *f, const char *name);   /* NULL when absent */
const char *nb_st_meta(const nb_st_file *f, const char *key);           /* NULL when absent */
/* Reads the tensor name into out[n] as float32 (F16 and BF16 converted exactly); n must be its
 * element count. When the file holds the tensor's checksum, the bytes read must match it. */
int nb_st_read_f32(const nb_st_file *f, const char *name, float *out, size_t n);
const char *nb_st_dtype_name(nb_st_dtype d);
/* Reads every tensor of f, so that each is checked against its checksum where the file holds one: 0, or -1
 * naming the file and the first tensor that fails. *checked (may be NULL): how many had a checksum. */
int nb_st_verify(const nb_st_file *f, int *checked);
/* XXH3 (64-bit, seed 0) of n bytes: the checksum nb_st_write stores for each tensor. */
uint64_t nb_st_checksum(const void *bytes, size_t n);

/* ---- sharded files: a part per stage and an index (Hugging Face's layout for large models) ---- */
typedef struct nb_st_set {
    int n;
    nb_st_file *files;   /* the parts, in the index's order */
} nb_st_set;
/* Opens dir/BASE.safetensors when it exists, else every part that dir/BASE.safetensors.index.json
 * names: the values of its "weight_map" (Hugging Face's index; each tensor must be in the part the
 * map names) and, where "metadata" has "parts": N, BASE-0000k-of-0000N.safetensors for k = 1..N.
 * Parts are plain file names in dir; no tensor may be in two parts; a missing part is an error
 * naming it. */
int nb_st_set_open(const char *dir, const char *base, nb_st_set *s);
void nb_st_set_close(nb_st_set *s);
/* The tensor name in whichever part holds it (*in: that part; may be NULL); NULL when absent. */
const nb_st_entry *nb_st_set_find(const nb_st_set *s, const char *name, const nb_st_file **in);
const char *nb_st_set_meta(const nb_st_set *s, const char *key);   /* the first part's that has it */
int nb_st_set_read_f32(const nb_st_set *s, const char *name, float *out, size_t n);
/* "BASE-0000k-of-0000n.safetensors", Hugging Face's name for part k (from 1) of n. */
void nb_st_part_name(char *buf, size_t size, const char *base, int k, int n);
typedef struct {
    const char *name, *file;
} nb_st_index_entry;
/* Writes an index atomically: "metadata" with "parts" (when parts > 0) and "total_size" (the bytes of
 * the tensors, when map is not NULL), and "weight_map" from map[n]. */
int nb_st_write_index(const char *path, const nb_st_index_entry *map, int n, int parts, uint64_t total_size);

/* ---- Hugging Face export ---- */
/* Creates dir (and its parents) if needed and writes dir/model.safetensors (the model's tensors
 * under their Hugging Face Llama names, stage after stage; tied copies skipped, so a tied model
 * has no lm_head.weight) and dir/config.json (LlamaForCausalLM), each atomically. */
int nb_export_hf(const nb_model *m, const char *dir);
/* An export folder that already holds a model (model.safetensors, its index or config.json): 1, else 0 (an
 * absent dir too). A path that exists and is not a folder: -1, nb_fail naming flag and the path. */
int nb_export_hf_occupied(const char *dir, const char *flag);
/* nb_export_hf_occupied, and a folder holding a model refused unless force (nb_fail naming flag and dir), and a
 * folder of prepared data, a checkpoint or a sweep refused even with force (its own files would go): 1 (a
 * model there, force given), 0 (none), -1. */
int nb_export_hf_refuse_occupied(const char *dir, const char *flag, int force);
/* Removes an export's files from dir (model*.safetensors, model.safetensors.index.json, config.json,
 * generation_config.json, tokenizer.json, tokenizer_config.json), nothing else; never through a link (nb_fs_remove_files). */
int nb_export_hf_clear(const char *dir);
/* Writes dir/generation_config.json (bos and eos: the last id, as config.json says); for exports. */
int nb_export_hf_generation_config(const nb_model *m, const char *dir);
/* `nobubble export`'s whole write: dir created and locked (.nobubble.lock, the lock a `train --export dir` run
 * holds for its life, so a run's folder is refused naming its pid) while it is checked (a model there: refused
 * unless force, which first removes the old export's files) and the model and both configs are written; flag
 * names dir in errors. */
int nb_export_hf_locked(const nb_model *m, const char *dir, int force, const char *flag);
/* Rewrites dir/config.json and dir/generation_config.json of an export with these bos and eos ids
 * (a tokenizer whose end-of-text token is not the last id: an imported Hugging Face one). */
int nb_export_hf_special_tokens(const nb_config *c, const char *dir, int bos, int eos);
/* The same, sharded a part per stage, so that each stage (a thread or an MPI process holding only its
 * own weights) writes its own: nb_export_hf_part writes stage's tensors as
 * dir/model-0000k-of-0000P.safetensors (k = stage + 1), nb_export_hf_index writes dir/config.json and
 * dir/model.safetensors.index.json from the tensor tables alone (no weights needed). Hugging Face's
 * from_pretrained and nb_import_hf load the folder as they load model.safetensors. next_step >= 0 is
 * recorded in the part's metadata ("next_step"), so that parts of two saves are never read as one
 * (nb_st_set_open refuses parts whose "next_step" differ); -1 records nothing. */
int nb_export_hf_part(const nb_model *m, int stage, const char *dir, int next_step);
int nb_export_hf_index(const nb_model *m, const char *dir);
/* Reads dir/config.json (its architecture fields must equal m's configuration; the error names
 * the field) and dir/model.safetensors (or the parts its index names) into m, which may be split into any number of stages;
 * a tied copy is filled from the embedding. A missing tensor, a shape mismatch or an unexpected
 * tensor is an error naming it; nothing is written into m unless every tensor checks out.
 * nb_import_hf_stages fills stages first..last only (each must hold its weights here: a pipeline's
 * process or thread loads its own layers), still checking the whole folder. */
int nb_import_hf(nb_model *m, const char *dir);
int nb_import_hf_stages(nb_model *m, const char *dir, int first, int last);
/* Reads dir/config.json of a LlamaForCausalLM saved by transformers 4.x or 5.x (rope_theta at the top
 * or in rope_parameters) into a configuration (context from max_position_embeddings; a missing field
 * takes LlamaConfig's default), validated. A field that would change what the weights compute and that
 * nobubble does not implement (RoPE scaling, an activation other than silu, biases, sliding windows,
 * another model type, ...) is refused, naming the file, the field, its value and what is supported
 * (docs/checkpoints.md, "Importing a Hugging Face model"). */
int nb_hf_read_config(const char *dir, nb_config *out);
/* Writes the config.json text for c into a malloc'ed string: LlamaForCausalLM, or MixtralForCausalLM for a
 * mixture of experts (NULL, nb_fail, when out of memory or for a mixture of experts with moe_every > 1,
 * which no Hugging Face architecture expresses). */
char *nb_hf_config_json(const nb_config *c);
#endif
