/* oneDNN matmul primitives cached per shape and thread (dnnl_matmul.h). A primitive fixes its thread
 * count when it is created, so the count is part of the key; each thread keeps its own cache (each
 * pipeline stage is a thread, and OpenMP's workers run tiles), freed when the thread ends. */
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/dnnl_matmul.h"
#include "util/error.h"

/* Entries per thread: a dense model uses a few dozen shapes; a mixture of experts under bf16 adds one per
 * product kind and each expert row count it meets (rounded to 64 rows, src/layers/moe.c), which a long
 * run's shifting loads spread over a few hundred. */
enum { CACHE_SIZE = 512 };

typedef struct {
    int used, threads;
    nb_matmul_shape shape;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a, b, c;
} cache_entry;

typedef struct {
    dnnl_stream_t stream;
    cache_entry entries[CACHE_SIZE];
    int next_victim;
} thread_cache;

static dnnl_engine_t engine;
static pthread_key_t cache_key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Only reachable through a programming error (bad strides) or a library failure. */
static int failed(const char *what, dnnl_status_t st) {
    return nb_fail("oneDNN's %s failed (status %d)", what, (int)st);
}

static void free_cache(void *p) {
    thread_cache *c = p;
    if (!c) return;
    for (int i = 0; i < CACHE_SIZE; i++)
        if (c->entries[i].used) dnnl_primitive_destroy(c->entries[i].prim);
    if (c->stream) dnnl_stream_destroy(c->stream);
    free(c);
}

static dnnl_status_t engine_status;

static void setup(void) {
    pthread_key_create(&cache_key, free_cache);
    engine_status = dnnl_engine_create(&engine, dnnl_cpu, 0);
}

/* This thread's cache, made on first use; NULL after nb_fail. */
static thread_cache *my_cache(void) {
    pthread_once(&once, setup);
    if (engine_status != dnnl_success) return failed("engine creation", engine_status), NULL;
    thread_cache *c = pthread_getspecific(cache_key);
    if (c) return c;
    c = calloc(1, sizeof *c);
    if (!c) return nb_fail("out of memory: oneDNN's matmul cache (%zu bytes)", sizeof *c), NULL;
    dnnl_status_t st = dnnl_stream_create(&c->stream, engine, dnnl_stream_default_flags);
    if (st != dnnl_success) {
        free(c);
        return failed("stream creation", st), NULL;
    }
    pthread_setspecific(cache_key, c);
    return c;
}

/* A rows x cols matrix with row stride ld, read as stored (trans = 0) or transposed. */
static int matrix_desc(dnnl_memory_desc_t *md, int rows, int cols, int ld, int trans, dnnl_data_type_t type) {
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {trans ? 1 : ld, trans ? ld : 1};
    dnnl_status_t st = dnnl_memory_desc_init_by_strides(md, 2, dims, type, strides);
    return st != dnnl_success ? failed("memory descriptor", st) : 0;
}

static int create_primitive(cache_entry *e) {
    const nb_matmul_shape *s = &e->shape;
    const dnnl_data_type_t in = s->bf16 ? dnnl_bf16 : dnnl_f32;
    if (matrix_desc(&e->a, s->M, s->K, s->lda, s->trans_a, in) || matrix_desc(&e->b, s->K, s->N, s->ldb, s->trans_b, in) ||
        matrix_desc(&e->c, s->M, s->N, s->ldc, 0, dnnl_f32))
        return -1;
    dnnl_matmul_desc_t md;
    dnnl_status_t st = dnnl_matmul_desc_init(&md, &e->a, &e->b, NULL, &e->c);
    if (st != dnnl_success) return failed("matmul descriptor", st);
    dnnl_primitive_attr_t attr;
    if ((st = dnnl_primitive_attr_create(&attr)) != dnnl_success) return failed("matmul attributes", st);
    dnnl_post_ops_t ops;
    if ((st = dnnl_post_ops_create(&ops)) != dnnl_success) {
        dnnl_primitive_attr_destroy(attr);
        return failed("matmul post-ops", st);
    }
    if (s->alpha != 1.0f) dnnl_primitive_attr_set_output_scales(attr, 1, 0, &s->alpha);
    if (s->beta != 0.0f) dnnl_post_ops_append_sum(ops, s->beta);
    dnnl_primitive_attr_set_post_ops(attr, ops);
    dnnl_primitive_desc_t pd;
    st = dnnl_primitive_desc_create(&pd, &md, attr, engine, NULL);
    dnnl_post_ops_destroy(ops);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) return failed("matmul primitive descriptor", st);
    st = dnnl_primitive_create(&e->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    return st != dnnl_success ? failed("matmul primitive", st) : 0;
}

static int same_shape(const nb_matmul_shape *x, const nb_matmul_shape *y) {
    return x->trans_a == y->trans_a && x->trans_b == y->trans_b && x->M == y->M && x->N == y->N && x->K == y->K &&
           x->lda == y->lda && x->ldb == y->ldb && x->ldc == y->ldc && x->alpha == y->alpha && x->beta == y->beta &&
           x->bf16 == y->bf16;
}

/* The cached primitive of this shape and thread count, made on first use; NULL after nb_fail. */
static cache_entry *find_or_create(thread_cache *c, const nb_matmul_shape *s) {
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    for (int i = 0; i < CACHE_SIZE; i++) {
        cache_entry *e = &c->entries[i];
        if (e->used && e->threads == threads && same_shape(&e->shape, s)) return e;
    }
    cache_entry *e = &c->entries[c->next_victim];
    c->next_victim = (c->next_victim + 1) % CACHE_SIZE;
    if (e->used) dnnl_primitive_destroy(e->prim);
    e->used = 0;
    e->shape = *s;
    e->threads = threads;
    if (create_primitive(e)) return NULL;
    e->used = 1;
    return e;
}

int nb_matmul_run(const nb_matmul_shape *s, const void *A, const void *B, float *C) {
    thread_cache *c = my_cache();
    cache_entry *e = c ? find_or_create(c, s) : NULL;
    if (!e) return -1;
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL;
    dnnl_status_t st = dnnl_memory_create(&ma, &e->a, engine, (void *)A);
    if (st == dnnl_success) st = dnnl_memory_create(&mb, &e->b, engine, (void *)B);
    if (st == dnnl_success) st = dnnl_memory_create(&mc, &e->c, engine, C);
    if (st == dnnl_success) {
        dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
        st = dnnl_primitive_execute(e->prim, c->stream, 3, args);
        if (st == dnnl_success) st = dnnl_stream_wait(c->stream);
    }
    if (ma) dnnl_memory_destroy(ma);
    if (mb) dnnl_memory_destroy(mb);
    if (mc) dnnl_memory_destroy(mc);
    return st != dnnl_success ? failed("matmul", st) : 0;
}
