/* The threads transport: one mailbox per stage in a shared hub. A send copies the bytes into a
 * message appended to the receiver's mailbox; a receive takes the first message of its
 * (source, tag) pair, waiting on the mailbox's condition variable. A failure is broadcast to
 * every mailbox, so that no receiver waits for a message that will never come. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "runtime/link.h"
#include "util/clock.h"
#include "util/error.h"

typedef struct message {
    struct message *next;
    int from, tag;
    size_t bytes;
    unsigned char data[];
} message;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    message *head, *tail;
} mailbox;

struct nb_hub {
    int n;
    mailbox *boxes;
    nb_link *links;
    pthread_mutex_t fail_mu;
    int failed;            /* read under a mailbox's lock, written under every one (see hub_fail) */
    char failure[1200];
};

static int hub_send(nb_link *l, int to, int tag, const void *buf, size_t bytes) {
    nb_hub *h = l->impl;
    message *m = malloc(sizeof *m + bytes);
    if (!m) return nb_fail("stage %d: out of memory sending %zu bytes to stage %d", l->stage, bytes, to);
    m->next = NULL;
    m->from = l->stage;
    m->tag = tag;
    m->bytes = bytes;
    if (bytes) memcpy(m->data, buf, bytes);
    mailbox *b = &h->boxes[to];
    pthread_mutex_lock(&b->mu);
    if (b->tail) b->tail->next = m;
    else b->head = m;
    b->tail = m;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return 0;
}

/* Unlinks and returns the first message of (from, tag), or NULL. Called with b->mu held. */
static message *take(mailbox *b, int from, int tag) {
    message *prev = NULL;
    for (message *m = b->head; m; prev = m, m = m->next)
        if (m->from == from && m->tag == tag) {
            if (prev) prev->next = m->next;
            else b->head = m->next;
            if (b->tail == m) b->tail = prev;
            return m;
        }
    return NULL;
}

static int hub_recv(nb_link *l, int from, int tag, void *buf, size_t bytes) {
    nb_hub *h = l->impl;
    mailbox *b = &h->boxes[l->stage];
    const struct timespec until = nb_deadline(l->timeout_s);
    int timed_out = 0;
    pthread_mutex_lock(&b->mu);
    message *m;
    while (!(m = take(b, from, tag)) && !h->failed && !timed_out) {
        if (l->timeout_s > 0) timed_out = pthread_cond_timedwait(&b->cv, &b->mu, &until) == ETIMEDOUT;
        else pthread_cond_wait(&b->cv, &b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    if (!m && timed_out && !h->failed) return nb_link_timed_out(l, from, tag);
    if (!m) return nb_fail("%s", h->failure);
    int rc = 0;
    if (m->bytes != bytes)
        rc = nb_fail("stage %d: message from stage %d (tag %d) has %zu bytes, expected %zu", l->stage, from, tag,
                     m->bytes, bytes);
    else if (bytes)
        memcpy(buf, m->data, bytes);
    free(m);
    return rc;
}

static void hub_fail(nb_link *l, const char *why) {
    nb_hub *h = l->impl;
    pthread_mutex_lock(&h->fail_mu);
    for (int i = 0; i < h->n; i++) pthread_mutex_lock(&h->boxes[i].mu);
    /* The first failure is the cause; later ones are its consequences. */
    if (!h->failed) snprintf(h->failure, sizeof h->failure, "stage %d failed: %s", l->stage, why);
    h->failed = 1;
    for (int i = 0; i < h->n; i++) {
        pthread_cond_broadcast(&h->boxes[i].cv);
        pthread_mutex_unlock(&h->boxes[i].mu);
    }
    pthread_mutex_unlock(&h->fail_mu);
}

static void hub_close(nb_link *l) { (void)l; }

static const nb_link_ops hub_ops = {hub_send, hub_recv, hub_fail, hub_close};

nb_hub *nb_hub_create(int n_stages) {
    if (n_stages < 1) {
        nb_fail("hub of %d stages: expected >= 1", n_stages);
        return NULL;
    }
    nb_hub *h = calloc(1, sizeof *h);
    if (!h || !(h->boxes = calloc((size_t)n_stages, sizeof *h->boxes)) ||
        !(h->links = calloc((size_t)n_stages, sizeof *h->links))) {
        if (h) free(h->boxes);
        free(h);
        nb_fail("out of memory for a hub of %d stages", n_stages);
        return NULL;
    }
    h->n = n_stages;
    pthread_mutex_init(&h->fail_mu, NULL);
    pthread_condattr_t monotonic;  /* timed waits measure intervals: immune to changes of the wall clock */
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    for (int i = 0; i < n_stages; i++) {
        pthread_mutex_init(&h->boxes[i].mu, NULL);
        pthread_cond_init(&h->boxes[i].cv, &monotonic);
        h->links[i] = (nb_link){&hub_ops, i, n_stages, h, 0};
    }
    pthread_condattr_destroy(&monotonic);
    return h;
}

nb_link *nb_hub_link(nb_hub *h, int stage) { return stage >= 0 && stage < h->n ? &h->links[stage] : NULL; }

const char *nb_hub_failure(nb_hub *h) {
    pthread_mutex_lock(&h->fail_mu);
    const char *f = h->failed ? h->failure : NULL;
    pthread_mutex_unlock(&h->fail_mu);
    return f;
}

void nb_hub_free(nb_hub *h) {
    if (!h) return;
    for (int i = 0; i < h->n; i++) {
        for (message *m = h->boxes[i].head, *next; m; m = next) {
            next = m->next;
            free(m);
        }
        pthread_mutex_destroy(&h->boxes[i].mu);
        pthread_cond_destroy(&h->boxes[i].cv);
    }
    pthread_mutex_destroy(&h->fail_mu);
    free(h->boxes);
    free(h->links);
    free(h);
}
