/* Per-endpoint message queues (see queue.h). Matching scans from the head, so two messages of one
 * (source, tag) pair leave in the order they came, while other pairs may be taken in any order. */
#include <stdlib.h>
#include <string.h>
#include "runtime/queue.h"
#include "util/error.h"

nb_msg *nb_msg_new(int self, int from, int to, int tag, const void *buf, size_t bytes) {
    nb_msg *m = malloc(sizeof *m + bytes);
    if (!m) {
        nb_fail("stage %d: out of memory sending %zu bytes to stage %d", self, bytes, to);
        return NULL;
    }
    m->next = NULL;
    m->from = from;
    m->tag = tag;
    m->bytes = bytes;
    if (bytes) memcpy(m->data, buf, bytes);
    return m;
}

void nb_queue_push(nb_queue *q, nb_msg *m) {
    if (q->tail) q->tail->next = m;
    else q->head = m;
    q->tail = m;
}

const nb_msg *nb_queue_find(const nb_queue *q, int from, int tag) {
    for (const nb_msg *m = q->head; m; m = m->next)
        if (m->from == from && m->tag == tag) return m;
    return NULL;
}

nb_msg *nb_queue_take(nb_queue *q, int from, int tag) {
    nb_msg *prev = NULL;
    for (nb_msg *m = q->head; m; prev = m, m = m->next)
        if (m->from == from && m->tag == tag) {
            if (prev) prev->next = m->next;
            else q->head = m->next;
            if (q->tail == m) q->tail = prev;
            return m;
        }
    return NULL;
}

int nb_msg_deliver(nb_msg *m, int self, void *buf, size_t bytes) {
    int rc = 0;
    if (m->bytes != bytes)
        rc = nb_fail("stage %d: message from stage %d (tag %d) has %zu bytes, expected %zu", self, m->from, m->tag,
                     m->bytes, bytes);
    else if (bytes)
        memcpy(buf, m->data, bytes);
    free(m);
    return rc;
}

void nb_queue_clear(nb_queue *q) {
    for (nb_msg *m = q->head, *next; m; m = next) {
        next = m->next;
        free(m);
    }
    q->head = q->tail = NULL;
}
