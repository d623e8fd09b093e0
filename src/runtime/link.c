/* The transport-independent half of a link: argument checks, then the implementation's op. */
#include <string.h>
#include "runtime/link.h"
#include "util/error.h"
#include "util/range.h"

/* Indexed by nb_transport_kind: --transport's names, summary.json's pipeline.transport. */
static const char *const transport_names[] = {"threads", "mpi"};
#define N_TRANSPORTS (int)(sizeof transport_names / sizeof transport_names[0])

const char *nb_transport_names(int i) { return (unsigned)i < N_TRANSPORTS ? transport_names[i] : NULL; }

void nb_transport_list(char *buf, size_t size) { nb_names_join(nb_transport_names, ", ", buf, size); }

int nb_transport_parse(const char *text, nb_transport_kind *out) {
    int k;
    if (nb_names_parse(nb_transport_names, "--transport", text, &k)) return -1;
    *out = (nb_transport_kind)k;
    return 0;
}

const char *nb_transport_name(nb_transport_kind kind) {
    return nb_transport_names(kind) ? nb_transport_names(kind) : "unknown";
}

int nb_link_stage(const nb_link *l) { return l->stage; }
int nb_link_count(const nb_link *l) { return l->count; }
int nb_link_replica(const nb_link *l) { return l->replica; }
int nb_link_replicas(const nb_link *l) { return l->replicas > 1 ? l->replicas : 1; }

void nb_link_add_values(void *acc, const void *x, size_t n, size_t value_bytes) {
    if (value_bytes == sizeof(double)) {
        double *a = acc;
        const double *b = x;
        for (size_t i = 0; i < n; i++) a[i] += b[i];
    } else {
        float *a = acc;
        const float *b = x;
        for (size_t i = 0; i < n; i++) a[i] += b[i];
    }
}

int nb_link_replica_sum(nb_link *l, void *buf, size_t n, size_t value_bytes) {
    if (value_bytes != sizeof(float) && value_bytes != sizeof(double))
        return nb_fail("stage %d: a sum over replicas of %zu-byte values: expected 4 (float) or 8 (double)", l->stage,
                       value_bytes);
    if (nb_link_replicas(l) == 1) return 0;
    if (!l->ops->replica_sum)
        return nb_fail("stage %d: this transport has no replicas to sum over (%d expected)", l->stage, l->replicas);
    return l->ops->replica_sum(l, buf, n, value_bytes);
}

int nb_link_bucket_start(nb_link *l, const void *values, size_t n, size_t value_bytes, nb_link_bucket **out) {
    *out = NULL;
    if (value_bytes != sizeof(float) && value_bytes != sizeof(double))
        return nb_fail("stage %d: a bucket of the sum over replicas of %zu-byte values: expected 4 (float) or 8 "
                       "(double)", l->stage, value_bytes);
    if (nb_link_replicas(l) == 1) return 0;
    if (!l->ops->bucket_start)
        return nb_fail("stage %d: this transport has no replicas to sum over (%d expected)", l->stage, l->replicas);
    return l->ops->bucket_start(l, values, n, value_bytes, out);
}

int nb_link_bucket_finish(nb_link *l, nb_link_bucket *b, void *buf, int wait) {
    return b ? l->ops->bucket_finish(l, b, buf, wait) : 1;
}

void nb_link_bucket_drop(nb_link *l, nb_link_bucket *b) {
    if (b) l->ops->bucket_drop(l, b);
}

static int check_peer(const nb_link *l, int peer, int tag) {
    if (peer < 0 || peer >= l->count || peer == l->stage)
        return nb_fail("stage %d: message to/from stage %d: expected another stage of 0..%d", l->stage, peer,
                       l->count - 1);
    if (tag < 0 || tag >= NB_LINK_TAGS) return nb_fail("stage %d: tag %d out of range [0, 2^20)", l->stage, tag);
    return 0;
}

int nb_link_send(nb_link *l, int to, int tag, const void *buf, size_t bytes) {
    if (check_peer(l, to, tag)) return -1;
    return l->ops->send(l, to, tag, buf, bytes);
}

int nb_link_recv(nb_link *l, int from, int tag, void *buf, size_t bytes) {
    if (check_peer(l, from, tag)) return -1;
    return l->ops->recv(l, from, tag, buf, bytes);
}

int nb_link_poll(nb_link *l, int from, int tag) {
    if (check_peer(l, from, tag)) return -1;
    return l->ops->poll(l, from, tag);
}

void nb_link_set_timeout(nb_link *l, double seconds) { l->timeout_s = seconds > 0 ? seconds : 0; }

int nb_link_timed_out(const nb_link *l, int from, int tag) {
    if (nb_link_replicas(l) > 1)
        return nb_fail("stage %d of replica %d: no message from stage %d (tag %d) for %g s: that stage has stalled or "
                       "died, or is slower than --peer-timeout allows", l->stage, l->replica, from, tag, l->timeout_s);
    return nb_fail("stage %d: no message from stage %d (tag %d) for %g s: that stage has stalled or died, or is slower "
                   "than --peer-timeout allows", l->stage, from, tag, l->timeout_s);
}

void nb_link_fail(nb_link *l, const char *message) { l->ops->fail(l, message); }

void nb_link_close(nb_link *l) {
    if (l) l->ops->close(l);
}
