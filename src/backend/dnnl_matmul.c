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

enum { CACHE_SIZE = 64 };

typedef struct {
    int used, threads, brgemm;
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

static void die(const char *what, dnnl_status_t st) {
    /* Only reachable through a programming error (bad strides) or a library failure: stop loudly. */
    fprintf(stderr, "nobubble: internal error: oneDNN %s failed (status %d)\n", what, (int)st);
    abort();
}

static void free_cache(void *p) {
    thread_cache *c = p;
    if (!c) return;
    for (int i = 0; i < CACHE_SIZE; i++)
        if (c->entries[i].used) dnnl_primitive_destroy(c->entries[i].prim);
    if (c->stream) dnnl_stream_destroy(c->stream);
    free(c);
}

static void setup(void) {
    pthread_key_create(&cache_key, free_cache);
    dnnl_status_t st = dnnl_engine_create(&engine, dnnl_cpu, 0);
    if (st != dnnl_success) die("engine creation", st);
}

static thread_cache *my_cache(void) {
    pthread_once(&once, setup);
    thread_cache *c = pthread_getspecific(cache_key);
    if (c) return c;
    c = calloc(1, sizeof *c);
    if (!c) {
        fprintf(stderr, "nobubble: out of memory (oneDNN matmul cache)\n");
        exit(3);
    }
    dnnl_status_t st = dnnl_stream_create(&c->stream, engine, dnnl_stream_default_flags);
    if (st != dnnl_success) die("stream creation", st);
    pthread_setspecific(cache_key, c);
    return c;
}

/* A rows x cols matrix with row stride ld, read as stored (trans = 0) or transposed. */
static void matrix_desc(dnnl_memory_desc_t *md, int rows, int cols, int ld, int trans, dnnl_data_type_t type) {
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {trans ? 1 : ld, trans ? ld : 1};
    dnnl_status_t st = dnnl_memory_desc_init_by_strides(md, 2, dims, type, strides);
    if (st != dnnl_success) die("memory descriptor", st);
}

static void create_primitive(cache_entry *e) {
    const nb_matmul_shape *s = &e->shape;
    const dnnl_data_type_t in = s->bf16 ? dnnl_bf16 : dnnl_f32;
    matrix_desc(&e->a, s->M, s->K, s->lda, s->trans_a, in);
    matrix_desc(&e->b, s->K, s->N, s->ldb, s->trans_b, in);
    matrix_desc(&e->c, s->M, s->N, s->ldc, 0, dnnl_f32);
    dnnl_matmul_desc_t md;
    dnnl_primitive_attr_t attr;
    dnnl_post_ops_t ops;
    dnnl_status_t st = dnnl_matmul_desc_init(&md, &e->a, &e->b, NULL, &e->c);
    if (st != dnnl_success) die("matmul descriptor", st);
    dnnl_primitive_attr_create(&attr);
    if (s->alpha != 1.0f) dnnl_primitive_attr_set_output_scales(attr, 1, 0, &s->alpha);
    dnnl_post_ops_create(&ops);
    if (s->beta != 0.0f) dnnl_post_ops_append_sum(ops, s->beta);
    dnnl_primitive_attr_set_post_ops(attr, ops);
    dnnl_primitive_desc_t pd;
    st = dnnl_primitive_desc_create(&pd, &md, attr, engine, NULL);
    if (st != dnnl_success) die("matmul primitive descriptor", st);
    const char *impl = "";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    e->brgemm = !strncmp(impl, "brg", 3);
    st = dnnl_primitive_create(&e->prim, pd);
    if (st != dnnl_success) die("matmul primitive", st);
    dnnl_primitive_desc_destroy(pd);
    dnnl_post_ops_destroy(ops);
    dnnl_primitive_attr_destroy(attr);
}

static int same_shape(const nb_matmul_shape *x, const nb_matmul_shape *y) {
    return x->trans_a == y->trans_a && x->trans_b == y->trans_b && x->M == y->M && x->N == y->N && x->K == y->K &&
           x->lda == y->lda && x->ldb == y->ldb && x->ldc == y->ldc && x->alpha == y->alpha && x->beta == y->beta &&
           x->bf16 == y->bf16;
}

static cache_entry *find_or_create(thread_cache *c, const nb_matmul_shape *s) {
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    for (int i = 0; i < CACHE_SIZE; i++) {
        cache_entry *e = &c->entries[i];
        if (e->used && e->threads == threads && same_shape(&e->shape, s)) return e;
    }
    cache_entry *e = &c->entries[c->next_victim];
    c->next_victim = (c->next_victim + 1) % CACHE_SIZE;
    if (e->used) dnnl_primitive_destroy(e->prim);
    e->shape = *s;
    e->threads = threads;
    create_primitive(e);
    e->used = 1;
    return e;
}

int nb_matmul_run(const nb_matmul_shape *s, const void *A, const void *B, float *C, int brgemm_only) {
    thread_cache *c = my_cache();
    cache_entry *e = find_or_create(c, s);
    if (brgemm_only && !e->brgemm) return 0;
    dnnl_memory_t ma, mb, mc;
    dnnl_memory_create(&ma, &e->a, engine, (void *)A);
    dnnl_memory_create(&mb, &e->b, engine, (void *)B);
    dnnl_memory_create(&mc, &e->c, engine, C);
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
    dnnl_status_t st = dnnl_primitive_execute(e->prim, c->stream, 3, args);
    if (st != dnnl_success) die("matmul", st);
    dnnl_stream_wait(c->stream);
    dnnl_memory_destroy(ma);
    dnnl_memory_destroy(mb);
    dnnl_memory_destroy(mc);
    return 1;
}
