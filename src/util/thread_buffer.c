/* Scratch memory per thread (thread_buffer.h). */
#include "util/thread_buffer.h"
#include <stdlib.h>

/* A buffer's size lives in a header one cache line long, so that the data stays 64-byte aligned. */
enum { HEADER = 64 };

static pthread_mutex_t key_lock = PTHREAD_MUTEX_INITIALIZER;

void *nb_thread_buffer_get(nb_thread_buffer *b, size_t bytes) {
    if (!atomic_load_explicit(&b->ready, memory_order_acquire)) {
        pthread_mutex_lock(&key_lock);
        if (!atomic_load_explicit(&b->ready, memory_order_relaxed) && pthread_key_create(&b->key, free) == 0)
            atomic_store_explicit(&b->ready, 1, memory_order_release);
        pthread_mutex_unlock(&key_lock);
        if (!atomic_load_explicit(&b->ready, memory_order_acquire)) return NULL;
    }
    char *mem = pthread_getspecific(b->key);
    if (mem && *(size_t *)mem >= bytes) return mem + HEADER;
    free(mem);
    pthread_setspecific(b->key, NULL);
    const size_t total = (HEADER + bytes + 63) / 64 * 64;
    mem = aligned_alloc(64, total);
    if (!mem) return NULL;
    *(size_t *)mem = bytes;
    pthread_setspecific(b->key, mem);
    return mem + HEADER;
}
