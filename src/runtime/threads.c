/* The threads transport: one mailbox per stage in a shared hub. A send copies the bytes into a
 * message appended to the receiver's mailbox; a receive takes the first message of its
 * (source, tag) pair, waiting on the mailbox's condition variable. A failure is broadcast to
 * every mailbox, so that no receiver waits for a message that will never come. Nothing here belongs
 * to a thread: any thread may use any link, so one thread may drive several endpoints (poll, then
 * receive only what is there). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "runtime/link.h"
#include "runtime/queue.h"
#include "util/clock.h"
#include "util/error.h"

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    nb_queue q;
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
    nb_msg *m = nb_msg_new(l->stage, l->stage, to, tag, buf, bytes);  /* copied outside the lock */
    if (!m) return -1;
    mailbox *b = &h->boxes[to];
    pthread_mutex_lock(&b->mu);
    nb_queue_push(&b->q, m);
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return 0;
}

static int hub_recv(nb_link *l, int from, int tag, void *buf, size_t bytes) {
    nb_hub *h = l->impl;
    mailbox *b = &h->boxes[l->stage];
    const struct timespec until = nb_deadline(l->timeout_s);
    int timed_out = 0;
    pthread_mutex_lock(&b->mu);
    nb_msg *m;
    while (!(m = nb_queue_take(&b->q, from, tag)) && !h->failed && !timed_out) {
        if (l->timeout_s > 0) timed_out = pthread_cond_timedwait(&b->cv, &b->mu, &until) == ETIMEDOUT;
        else pthread_cond_wait(&b->cv, &b->mu);
    }
    /* Read before unlocking: hub_fail writes it (and the message) under this lock, so a read after the
     * unlock raced with a failure on another thread. Once seen set, both are final. */
    const int failed = h->failed;
    pthread_mutex_unlock(&b->mu);
    if (!m && !failed) return nb_link_timed_out(l, from, tag);
    if (!m) return nb_fail("%s", h->failure);
    return nb_msg_deliver(m, l->stage, buf, bytes);
}

/* A failure outranks a waiting message: the run is over, and a driver that polls learns it at once
 * (a receive still takes a message that is there, as it always has). */
static int hub_poll(nb_link *l, int from, int tag) {
    nb_hub *h = l->impl;
    mailbox *b = &h->boxes[l->stage];
    pthread_mutex_lock(&b->mu);
    const int failed = h->failed, there = nb_queue_find(&b->q, from, tag) != NULL;
    pthread_mutex_unlock(&b->mu);
    return failed ? nb_fail("%s", h->failure) : there;
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

static const nb_link_ops hub_ops = {hub_send, hub_recv, hub_poll, hub_fail, hub_close, NULL, NULL, NULL, NULL};

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
        h->links[i] = (nb_link){&hub_ops, i, n_stages, h, 0, 0, 1};
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
        nb_queue_clear(&h->boxes[i].q);
        pthread_mutex_destroy(&h->boxes[i].mu);
        pthread_cond_destroy(&h->boxes[i].cv);
    }
    pthread_mutex_destroy(&h->fail_mu);
    free(h->boxes);
    free(h->links);
    free(h);
}
