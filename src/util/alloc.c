/* Allocations that fail with a message (util/alloc.h), and the test hook that makes one of them fail. */
#include "util/alloc.h"
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "util/error.h"

static atomic_long calls;

/* N when this call is the N-th, the one NB_TRAIN_FAULT=alloc:N names; else 0. (Read at every call: a
 * test sets it per run, and an allocation costs far more than a getenv.) */
static long injected_failure(void) {
    const long n = atomic_fetch_add(&calls, 1) + 1;
    const char *spec = getenv("NB_TRAIN_FAULT");
    return spec && !strncmp(spec, "alloc:", 6) && atol(spec + 6) == n ? n : 0;
}

/* The message of a failed allocation; `injected`: the call's number when the test hook failed it. */
static void *failed(size_t bytes, const char *what, long injected) {
    if (injected) nb_fail("out of memory allocating %s (%zu bytes) [injected: NB_TRAIN_FAULT=alloc:%ld]", what, bytes, injected);
    else nb_fail("out of memory allocating %s (%zu bytes)", what, bytes);
    return NULL;
}

void *nb_alloc(size_t bytes, const char *what) {
    const long injected = injected_failure();
    if (injected) return failed(bytes, what, injected);
    void *p = malloc(bytes ? bytes : 1);
    return p ? p : failed(bytes, what, 0);
}

void *nb_calloc(size_t n, size_t size, const char *what) {
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes)) {
        nb_fail("out of memory allocating %s (%zu x %zu bytes: more than memory can address)", what, n, size);
        return NULL;
    }
    const long injected = injected_failure();
    if (injected) return failed(bytes, what, injected);
    void *p = calloc(bytes ? bytes : 1, 1);
    return p ? p : failed(bytes, what, 0);
}

void *nb_alloc_aligned(size_t bytes, const char *what) {
    const long injected = injected_failure();
    if (injected) return failed(bytes, what, injected);
    if (bytes > SIZE_MAX - 63) return failed(bytes, what, 0);
    const size_t rounded = bytes ? (bytes + 63) / 64 * 64 : 64;  /* aligned_alloc wants a multiple */
    void *p = aligned_alloc(64, rounded);
    if (!p) return failed(bytes, what, 0);
    memset(p, 0, rounded);
    return p;
}

void *nb_realloc(void *p, size_t bytes, const char *what) {
    const long injected = injected_failure();
    if (injected) return failed(bytes, what, injected);
    void *q = realloc(p, bytes ? bytes : 1);
    return q ? q : failed(bytes, what, 0);
}
