/* The threads transport as the executor uses it: polls (before and after a send, other pairs,
 * failures), the order of one pair's messages, one thread driving several endpoints round-robin
 * with polls (a ring, and the MPI test's whole protocol on a loopback hub), and a receive that times
 * out on one thread while another fails the hub. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "link_script.h"
#include "nobubble/common.h"
#include "nobubble/runtime.h"

static void check_poll(void) {
    nb_hub *hub = nb_hub_create(3);
    nb_link *a = nb_hub_link(hub, 0), *b = nb_hub_link(hub, 1);
    int x = 5, y = 0;
    CHECK(nb_link_poll(a, 1, 4) == 0, "poll before the send: 0");
    CHECK(nb_link_send(b, 0, 4, &x, sizeof x) == 0, "send");
    CHECK(nb_link_poll(a, 1, 4) == 1, "poll after the send: 1");
    CHECK(nb_link_poll(a, 1, 4) == 1, "a poll leaves the message in place");
    CHECK(nb_link_poll(a, 1, 5) == 0 && nb_link_poll(a, 2, 4) == 0, "another tag or source: 0");
    CHECK(nb_link_poll(b, 0, 4) == 0, "the sender's own mailbox: 0");
    CHECK(nb_link_recv(a, 1, 4, &y, sizeof y) == 0 && y == 5, "the polled message is received");
    CHECK(nb_link_poll(a, 1, 4) == 0, "poll after the receive: 0");
    CHECK(nb_link_poll(a, 0, 4) == -1 && nb_link_poll(a, 3, 4) == -1 && nb_link_poll(a, 1, 1 << 20) == -1,
          "poll of itself, an endpoint out of range or a tag out of range is refused (%s)", nb_last_error());
    nb_hub_free(hub);
}

static void check_order(void) {
    nb_hub *hub = nb_hub_create(2);
    nb_link *a = nb_hub_link(hub, 0), *b = nb_hub_link(hub, 1);
    int first = 1, second = 2, other = 3, y = 0;
    nb_link_send(b, 0, 7, &first, sizeof first);
    nb_link_send(b, 0, 8, &other, sizeof other);
    nb_link_send(b, 0, 7, &second, sizeof second);
    CHECK(nb_link_recv(a, 1, 8, &y, sizeof y) == 0 && y == 3, "another tag's message is taken out of order");
    CHECK(nb_link_recv(a, 1, 7, &y, sizeof y) == 0 && y == 1, "one pair: the first message first (%d)", y);
    CHECK(nb_link_poll(a, 1, 7) == 1 && nb_link_recv(a, 1, 7, &y, sizeof y) == 0 && y == 2, "then the second");
    nb_hub_free(hub);
}

static void check_failure(void) {
    nb_hub *hub = nb_hub_create(3);
    nb_link *a = nb_hub_link(hub, 0), *b = nb_hub_link(hub, 1), *c = nb_hub_link(hub, 2);
    int x = 1;
    nb_link_send(b, 0, 2, &x, sizeof x);
    nb_link_fail(c, "disk full");
    CHECK(nb_link_poll(a, 1, 3) == -1 && strstr(nb_last_error(), "stage 2 failed: disk full"),
          "poll after a failure: -1 naming the failed endpoint (%s)", nb_last_error());
    CHECK(nb_link_poll(a, 1, 2) == -1 && strstr(nb_last_error(), "stage 2 failed"),
          "a failure outranks a waiting message (%s)", nb_last_error());
    CHECK(nb_link_poll(b, 0, 2) == -1, "every endpoint sees it");
    nb_hub_free(hub);
}

/* A receive that times out on its own thread, then another thread fails the hub: the receive says it
 * timed out (the failure came after it). The only order between the two is `returned`, relaxed on
 * purpose: it orders nothing for ThreadSanitizer (tools/ci/tsan.sh), which then sees whether the
 * receive read the hub's failure flag under its mailbox's lock, as every write of it is made (it read
 * it after unlocking, a data race with the failing thread's write). */
typedef struct {
    nb_link *link;
    atomic_int returned;
    int rc;
    char error[256];
} timed_recv;

static void *recv_until_timeout(void *arg) {
    timed_recv *r = arg;
    int y;
    r->rc = nb_link_recv(r->link, 1, 3, &y, sizeof y);
    snprintf(r->error, sizeof r->error, "%s", nb_last_error());
    atomic_store_explicit(&r->returned, 1, memory_order_relaxed);
    return NULL;
}

static void check_timeout_then_failure(void) {
    nb_hub *hub = nb_hub_create(3);
    timed_recv r = {.link = nb_hub_link(hub, 0)};
    nb_link_set_timeout(r.link, 0.02);
    pthread_t tid;
    if (pthread_create(&tid, NULL, recv_until_timeout, &r)) {
        CHECK(0, "could not start the receiving thread");
        nb_hub_free(hub);
        return;
    }
    while (!atomic_load_explicit(&r.returned, memory_order_relaxed)) sched_yield();
    nb_link_fail(nb_hub_link(hub, 2), "disk full");
    pthread_join(tid, NULL);
    CHECK(r.rc == -1 && strstr(r.error, "no message from stage 1 (tag 3) for 0.02 s"),
          "a receive that timed out before the failure says so (%s)", r.error);
    CHECK(nb_link_poll(nb_hub_link(hub, 0), 1, 3) == -1 && strstr(nb_last_error(), "stage 2 failed: disk full"),
          "then the failure is seen (%s)", nb_last_error());
    nb_hub_free(hub);
}

/* A token goes round a ring of 3 endpoints 5 times, all driven by this thread: endpoint 0 sends
 * first, each other endpoint receives before it sends. A driver that received in order without
 * polling would wait for ever at endpoint 0's first receive. */
static void check_ring(void) {
    enum { N = 3, ROUNDS = 5 };
    nb_hub *hub = nb_hub_create(N);
    static ls_endpoint eps[N];
    for (int e = 0; e < N; e++) {
        eps[e] = (ls_endpoint){.link = nb_hub_link(hub, e)};
        for (int r = 0; r < ROUNDS; r++) {
            if (e == 0) ls_add(&eps[e], 'S', 1, 9, r, 8);
            ls_add(&eps[e], 'R', (e + N - 1) % N, 9, r, 8);
            if (e != 0) ls_add(&eps[e], 'S', (e + 1) % N, 9, r, 8);
        }
    }
    CHECK(ls_run(eps, N, 5) == 0, "one thread drives a ring of 3 endpoints (%s)", nb_last_error());
    CHECK(eps[0].next == eps[0].n && eps[2].next == eps[2].n, "every action ran");
    nb_hub_free(hub);
}

/* tests/link_mpi.c's protocol with every endpoint in this thread: what rank 0 and the others do
 * on MPI, on a loopback hub. */
static void check_protocol(int P) {
    nb_hub *hub = nb_hub_create(P + 1);
    static ls_endpoint eps[9];
    for (int e = 0; e <= P; e++) {
        eps[e].link = nb_hub_link(hub, e);
        ls_protocol(&eps[e], e, P);
    }
    CHECK(ls_run(eps, P + 1, 5) == 0, "P = %d: the MPI test's protocol on one thread (%s)", P, nb_last_error());
    for (int e = 0; e <= P; e++) CHECK(nb_link_poll(eps[e].link, (e + 1) % (P + 1), 1) == 0, "nothing left over");
    nb_hub_free(hub);
}

int main(void) {
    check_poll();
    check_order();
    check_failure();
    check_timeout_then_failure();
    check_ring();
    for (int P = 2; P <= 4; P++) check_protocol(P);
    return check_summary();
}
