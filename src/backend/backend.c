/* The backend object's public calls (include/nobubble/backend.h): opening by name, which picks the
 * implementation (the CPU's in cpu.c, the GPU's in cuda/cuda.c where the build has it), the process's
 * default, and the accessors. Everything else a backend does is its operation table's. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cpu.h"
#include "backend/cuda.h"
#include "backend/guarded.h"
#include "util/error.h"

#ifdef NB_HAVE_CUDA
#define CUDA_CHOICE ", or cuda (the products on an NVIDIA GPU through cuBLAS)"
#else
#define CUDA_CHOICE ""
#endif

const char *nb_backend_choices(void) {
    return "tiles, hybrid, onednn or openblas (with :onednn or :widen for the bf16 products)" CUDA_CHOICE;
}

/* spec, or the build's default for NULL and "": 0 when this build has that backend. */
static int known(const char **spec) {
    if (!*spec || !**spec) *spec = nb_cpu_default_name();
    if (strlen(*spec) >= sizeof ((nb_backend *)0)->name) return nb_fail("backend '%.40s...': name too long", *spec);
    if (strcmp(*spec, "cuda"))
        return nb_cpu_known(*spec) ? 0 : nb_fail("backend '%s': expected %s", *spec, nb_backend_choices());
#ifdef NB_HAVE_CUDA
    return 0;
#else
    return nb_fail("backend 'cuda': this build has no CUDA backend (configure with -DNB_CUDA=ON where the CUDA toolkit "
                   "is installed); expected %s",
                   nb_backend_choices());
#endif
}

int nb_backend_known(const char *spec) { return known(&spec); }

int nb_backend_open(const char *spec, nb_backend **out) {
    *out = NULL;
    if (known(&spec)) return -1;
#ifdef NB_HAVE_CUDA
    if (!strcmp(spec, "cuda")) return nb_cuda_open(spec, out);
#endif
    return nb_cpu_open(spec, out);
}

void nb_backend_close(nb_backend *b) {
    if (b) b->ops->close(b);
}

/* The default is opened on first use; a failed open (memory that ran out) is tried again by the next
 * call rather than remembered, and each failing call returns its own reason. */
static nb_backend *default_backend;
static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;

const nb_backend *nb_backend_default(void) {
    pthread_mutex_lock(&default_lock);
    if (!default_backend && nb_backend_open(NULL, &default_backend)) default_backend = NULL;
    nb_backend *b = default_backend;
    pthread_mutex_unlock(&default_lock);
    return b;
}

const char *nb_backend_name(const nb_backend *b) { return b->name; }
const char *nb_backend_label(const nb_backend *b) { return b->label; }
int nb_backend_check(const nb_backend *b) { return b->ops->check(b); }

int nb_backend_device_named(const char *device) {
    return !strcmp(device, "cpu") || !strcmp(device, "guarded") || !strcmp(device, "cuda");
}

int nb_backend_cuda_next_asked(void) {
    const char *v = getenv("NB_CUDA_KERNELS");
    return v && !strcmp(v, "next");
}
int nb_backend_bf16_native(const nb_backend *b) { return b->bf16_native; }

#ifdef NB_HAVE_CUDA
const char *nb_backend_devices(void) { return "cpu, guarded or cuda"; }
#else
const char *nb_backend_devices(void) { return "cpu or guarded (cuda needs a build with -DNB_CUDA=ON)"; }
#endif

int nb_backend_open_device(const char *device, const char *spec, nb_backend **out) {
    *out = NULL;
    if (!device || !*device || !strcmp(device, "cpu")) return nb_backend_open(spec, out);
    if (!strcmp(device, "guarded")) {
        if (spec && !strcmp(spec, "cuda"))
            return nb_fail("--device guarded: over the backend 'cuda': expected a CPU backend (%s)", nb_backend_choices());
        nb_backend *inner;
        if (nb_backend_open(spec, &inner)) return -1;
        if (!(*out = nb_guarded_wrap(inner, 1))) {
            nb_backend_close(inner);
            return -1;
        }
        return 0;
    }
    if (strcmp(device, "cuda")) return nb_fail("device '%s': expected %s", device, nb_backend_devices());
    if (spec && *spec && strcmp(spec, "cuda"))
        return nb_fail("--device cuda: the products run on the GPU (cuBLAS); backend '%s' is a CPU's (leave --gemm out)",
                       spec);
#ifdef NB_HAVE_CUDA
    return nb_cuda_open_device_memory(out);
#else
    return nb_fail("device 'cuda': this build has no CUDA backend (configure with -DNB_CUDA=ON where the CUDA toolkit is "
                   "installed); expected %s", nb_backend_devices());
#endif
}
