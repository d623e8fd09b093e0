/* nobubble: the backend, the one object that runs a stage's matrix products and owns its memory.
 *
 * A run opens one backend when it starts and every stage holds it (nb_stage.backend); the optimizer
 * and the delay rules reach it through the stage. The CPU backends differ only in which library runs
 * which product:
 *   tiles     oneDNN's sgemm, nobubble's own register tiles for A^T B (every weight gradient);
 *             the default where the build targets AVX-512
 *   hybrid    oneDNN's sgemm, OpenBLAS for A^T B (where oneDNN 2.6 runs at half speed); the default
 *             elsewhere
 *   onednn    oneDNN alone, and openblas, OpenBLAS alone: single-library references, for tests and
 *             comparisons (each measured slower than the defaults: BENCHMARKS.md)
 * Products with bf16 operands run oneDNN's bf16 matmul where the CPU has bf16 instructions, else on the
 * widened operands through the fp32 products; a suffix forces one of the two: "tiles:onednn",
 * "hybrid:widen" (tests run both on any machine). Every product is deterministic and independent of the
 * thread count (docs/executor.md, "Thread counts").
 *
 * Errors: a product that fails inside a backend (out of memory, a library's failure) is recorded in the
 * backend, never exits; nb_backend_check reports it. (An allocation fails at once, returning NULL.) A stage's forward and backward
 * and the optimizer's step check before they return. */
#ifndef NOBUBBLE_BACKEND_H
#define NOBUBBLE_BACKEND_H
#include "nobubble/common.h"

typedef struct nb_backend nb_backend;

/* Opens the backend named by spec ("NAME" or "NAME:BF16", above); NULL or "" opens the build's default.
 * An unknown name fails, listing the choices. Close with nb_backend_close. */
int nb_backend_open(const char *spec, nb_backend **out);
/* Where a run's stages keep their memory (`--device`): "cpu" (or NULL, ""): the host's, the products on the
 * backend spec names (nb_backend_open); "cuda": an NVIDIA GPU's, with nobubble's kernels for the layers, the
 * optimizer's element-wise rules and the delay rules (spec NULL, "" or "cuda"; -DNB_CUDA=ON builds only);
 * "guarded": the CPU behind a device's boundary, memory the host cannot touch, over the CPU backend spec
 * names: the CPU's bits, for checking the device path where there is no GPU (docs/gpu.md). A stage on a
 * device runs dense models in fp32 or bf16; what is not supported there yet (mixture-of-experts blocks; on
 * cuda, SGD and bf16 Newton-Schulz) is refused when the run is made. */
int nb_backend_open_device(const char *device, const char *spec, nb_backend **out);
/* "cpu, guarded or cuda" as this build has them: for help texts and errors. */
const char *nb_backend_devices(void);
void nb_backend_close(nb_backend *b);
/* 0 when spec names a backend of this build (as nb_backend_open reads it), else -1 with its message: a
 * name checked without opening anything (no memory, no device), for validating settings. */
int nb_backend_known(const char *spec);
/* The process's default backend (the build's default, opened on first use and never closed): what a
 * model or an optimizer made without one uses. */
const nb_backend *nb_backend_default(void);
/* The name as opened ("tiles", "hybrid:widen") and a description for run headers. */
const char *nb_backend_name(const nb_backend *b);
const char *nb_backend_label(const nb_backend *b);
/* "tiles, hybrid, onednn or openblas (with :onednn or :widen for the bf16 products)": for help texts
 * and errors. */
const char *nb_backend_choices(void);
/* 0 when every product since the last check succeeded; otherwise -1 with the first
 * failure's message (and the record cleared). Waits for the backend's queued work first (a device's). */
int nb_backend_check(const nb_backend *b);
/* 1 where b's bf16 products run on bf16 instructions (not widened). */
int nb_backend_bf16_native(const nb_backend *b);
#endif
