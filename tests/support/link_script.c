/* Link scripts (see link_script.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "link_script.h"
#include "util/clock.h"
#include "util/error.h"

void ls_fill(unsigned char *buf, size_t n, int from, int to, int tag, int seq) {
    const uint32_t h = (uint32_t)from * 2654435761u ^ (uint32_t)to * 40503u ^ (uint32_t)tag * 97u ^ (uint32_t)seq * 7919u;
    for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)((h >> (8 * (i % 4))) + i);
}

void ls_add(ls_endpoint *e, char kind, int peer, int tag, int seq, size_t bytes) {
    if (e->n < (int)(sizeof e->acts / sizeof e->acts[0])) e->acts[e->n++] = (ls_action){kind, peer, tag, seq, bytes};
}

static int do_send(ls_endpoint *e, const ls_action *a) {
    unsigned char *buf = malloc(a->bytes + 1);
    if (!buf) return nb_fail("out of memory");
    ls_fill(buf, a->bytes, nb_link_stage(e->link), a->peer, a->tag, a->seq);
    int rc = nb_link_send(e->link, a->peer, a->tag, buf, a->bytes);
    free(buf);
    return rc;
}

static int do_recv(ls_endpoint *e, const ls_action *a) {
    const int me = nb_link_stage(e->link);
    unsigned char *buf = malloc(a->bytes + 1), *want = malloc(a->bytes + 1);
    int rc = buf && want ? nb_link_recv(e->link, a->peer, a->tag, buf, a->bytes) : nb_fail("out of memory");
    if (!rc) {
        ls_fill(want, a->bytes, a->peer, me, a->tag, a->seq);
        if (memcmp(buf, want, a->bytes))
            rc = nb_fail("endpoint %d: message %d from %d (tag %d) has the wrong bytes", me, a->seq, a->peer, a->tag);
    }
    free(buf);
    free(want);
    return rc;
}

/* Runs e's actions as far as they go without waiting: 1 if it moved, 0 if not, -1 on failure. */
static int advance(ls_endpoint *e) {
    int moved = 0;
    while (e->next < e->n) {
        const ls_action *a = &e->acts[e->next];
        if (a->kind == 'R') {
            const int there = nb_link_poll(e->link, a->peer, a->tag);
            if (there <= 0) return there < 0 ? -1 : moved;
            if (do_recv(e, a)) return -1;
        } else if (do_send(e, a)) {
            return -1;
        }
        e->next++;
        moved = 1;
    }
    return moved;
}

static int stuck(const ls_endpoint *eps, int n_eps, double timeout_s) {
    int i = 0;
    while (i < n_eps - 1 && eps[i].next == eps[i].n) i++;
    const ls_action *a = &eps[i].acts[eps[i].next];
    return nb_fail("no endpoint moved for %g s: endpoint %d waits for tag %d from %d", timeout_s,
                   nb_link_stage(eps[i].link), a->tag, a->peer);
}

int ls_run(ls_endpoint *eps, int n_eps, double timeout_s) {
    double last = nb_now();
    for (;;) {
        int moved = 0, left = 0;
        for (int i = 0; i < n_eps; i++) {
            const int rc = advance(&eps[i]);
            if (rc < 0) return -1;
            moved |= rc;
            left += eps[i].next < eps[i].n;
        }
        if (!left) return 0;
        if (moved) last = nb_now();
        else if (nb_now() - last > timeout_s)
            return stuck(eps, n_eps, timeout_s);
        else
            nanosleep(&(struct timespec){0, 50000}, NULL);  /* a remote message is on its way */
    }
}

enum { T_HELLO = 1, T_RING, T_ANSWER, T_BIG, T_ZERO, T_SAME, T_ORDER };

static void stage_protocol(ls_endpoint *ep, int s, int P) {
    ls_add(ep, 'S', P, T_HELLO, 0, 16);
    ls_add(ep, 'S', (s + 1) % P, T_RING, 0, 1024);
    if (s == 0) {
        ls_add(ep, 'S', P, T_BIG, 0, LS_BIG);
        ls_add(ep, 'S', P, T_ZERO, 0, 0);
        ls_add(ep, 'S', P, T_ORDER, 0, 100);
        ls_add(ep, 'S', P, T_ORDER, 1, 200);
        ls_add(ep, 'S', 1, T_SAME, 0, 64);
    }
    ls_add(ep, 'R', (s + P - 1) % P, T_RING, 0, 1024);
    ls_add(ep, 'R', P, T_ANSWER, 0, 16);
    if (s == 0) {
        ls_add(ep, 'R', P, T_BIG, 1, LS_BIG);
        ls_add(ep, 'R', P, T_ZERO, 1, 0);
    }
    if (s == 1) {  /* the coordinator's first, though endpoint 0's may have come first */
        ls_add(ep, 'R', P, T_SAME, 0, 64);
        ls_add(ep, 'R', 0, T_SAME, 0, 64);
        ls_add(ep, 'R', P, T_ORDER, 0, 32);
        ls_add(ep, 'R', P, T_ORDER, 1, 32);
    }
}

static void coordinator_protocol(ls_endpoint *ep, int P) {
    ls_add(ep, 'S', 1, T_SAME, 0, 64);
    ls_add(ep, 'S', 1, T_ORDER, 0, 32);
    ls_add(ep, 'S', 1, T_ORDER, 1, 32);
    for (int s = 0; s < P; s++) {
        ls_add(ep, 'R', s, T_HELLO, 0, 16);
        ls_add(ep, 'S', s, T_ANSWER, 0, 16);
    }
    ls_add(ep, 'R', 0, T_BIG, 0, LS_BIG);
    ls_add(ep, 'S', 0, T_BIG, 1, LS_BIG);
    ls_add(ep, 'R', 0, T_ZERO, 0, 0);
    ls_add(ep, 'S', 0, T_ZERO, 1, 0);
    ls_add(ep, 'R', 0, T_ORDER, 0, 100);
    ls_add(ep, 'R', 0, T_ORDER, 1, 200);
}

void ls_protocol(ls_endpoint *ep, int e, int P) {
    ep->n = ep->next = 0;
    if (e < P) stage_protocol(ep, e, P);
    else coordinator_protocol(ep, P);
}
