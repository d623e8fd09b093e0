/* Internal: allocations that fail with a message instead of stopping the process. The library never
 * exits: where memory runs out, the call that needed it returns its error (nb_fail) and its callers
 * release what they took, up to the public function, which returns -1 (or NULL). */
#ifndef NB_UTIL_ALLOC_H
#define NB_UTIL_ALLOC_H
#include <stddef.h>

/* `bytes` bytes (at least 1), uninitialized. NULL when they cannot be had, with nb_fail("out of memory
 * allocating WHAT (N bytes)"): `what` names what they were to hold ("stage 0's weights"). */
void *nb_alloc(size_t bytes, const char *what);
/* n elements of `size` bytes, zeroed; a product that overflows fails like any other. */
void *nb_calloc(size_t n, size_t size, const char *what);
/* `bytes` rounded up to a multiple of 64, 64-byte aligned, zeroed; free() releases it. */
void *nb_alloc_aligned(size_t bytes, const char *what);
/* p grown or shrunk to `bytes`, as realloc; on failure p is left as it was (the caller still owns it). */
void *nb_realloc(void *p, size_t bytes, const char *what);

/* Test hook: NB_TRAIN_FAULT=alloc:N makes the N-th of the process's calls of the functions above (from 1)
 * fail as if memory had run out, so that tests can see every caller on the way up report the error and
 * release what it holds. The calls are counted whether or not the hook is set. */
#endif
