/* Internal: scratch memory per thread that outlives one call (a GEMM's packing buffers): allocated at a
 * thread's first request, grown when a larger one is asked, kept for the thread's next calls, and
 * freed when the thread exits (a pthread key's destructor, so the sanitizers' leak check sees none). */
#ifndef NB_UTIL_THREAD_BUFFER_H
#define NB_UTIL_THREAD_BUFFER_H
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

/* One per kind of buffer, static, zero-initialized: `static nb_thread_buffer scratch;`. */
typedef struct {
    atomic_int ready; /* the key exists */
    pthread_key_t key;
} nb_thread_buffer;

/* The calling thread's buffer of at least `bytes`, 64-byte aligned; its contents are undefined (kept
 * from the thread's last use, or new). NULL when memory runs out. */
void *nb_thread_buffer_get(nb_thread_buffer *b, size_t bytes);
#endif
