/* Reading the NBFX0001 fixtures written by tools/reference/llama_reference.py.
 *
 * Format (all little-endian):
 *   8 bytes magic "NBFX0001"
 *   u32 entry count
 *   per entry: u32 name length, name bytes (no NUL), u32 dtype (0 = f64, 1 = i32),
 *              u32 ndim, ndim x u64 dims, then prod(dims) elements of the dtype (row-major).
 * The reference writes "config" (i32 [10]: vocab, d_model, n_layers, n_heads, n_kv_heads,
 * d_ffn, context, tied, B, T), "rope_theta", "norm_eps" (f64 [1]), "tokens", "targets"
 * (i32 [B*T]), "loss" (f64 [1]), "logits" (f64 [B*T, V]), each weight by its Hugging Face
 * name and each gradient as "grad:" + name. */
#ifndef NB_TESTS_FIXTURE_H
#define NB_TESTS_FIXTURE_H
#include <stddef.h>
#include <stdint.h>

enum { NBFX_F64 = 0, NBFX_I32 = 1 };
#define NBFX_MAX_DIMS 8

typedef struct nbfx_entry {
    char *name;
    int dtype;                       /* NBFX_F64 or NBFX_I32 */
    int ndim;
    uint64_t dims[NBFX_MAX_DIMS];
    size_t numel;
    double *f64;                     /* set when dtype == NBFX_F64, else NULL */
    int32_t *i32;                    /* set when dtype == NBFX_I32, else NULL */
} nbfx_entry;

typedef struct nbfx {
    int n_entries;
    nbfx_entry *entries;
} nbfx;

/* Reads a whole fixture; NULL (after a message on stderr naming the file and the problem)
 * when it cannot be read or is malformed. */
nbfx *nbfx_load(const char *path);
/* The entry with this exact name, or NULL. */
const nbfx_entry *nbfx_get(const nbfx *f, const char *name);
void nbfx_free(nbfx *f);

/* The model configuration a model fixture describes: "config" (i32 [10]: vocab, d, layers,
 * heads, kv heads, ffn, context, tied, B, T), "rope_theta" (f64 [1]) and optionally "norm_eps"
 * (f64 [1], else 1e-5); a mixture of experts (Mixtral: every block) "moe" (i32 [2]: experts, experts per
 * token) and "aux_coef" (f64 [1]); the rest of the fields from the tiny preset. *B and *T receive the batch
 * shape. -1 with a message on stderr when an entry is missing or malformed. */
struct nb_config;
int nbfx_model_config(const nbfx *f, struct nb_config *cfg, int *B, int *T);
#endif
