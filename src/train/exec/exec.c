/* The executor's driver: endpoints run their lowered lists, a flat loop over actions (exec.h). */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "train/exec/exec.h"
#include "util/clock.h"
#include "util/error.h"

void exec_last_saved(exec_run *run, char *buf, size_t size) {
    pthread_mutex_lock(&run->saved_mu);
    snprintf(buf, size, "%s", run->last_saved);
    pthread_mutex_unlock(&run->saved_mu);
}

/* out->unproven from the remembered steps, "DIR/step_000006, DIR/step_000007" (run->saved_mu held): made
 * when asked for, from the steps, the one record of them. */
static void list_unproven(const exec_run *run, train_checkpoints *out) {
    const size_t size = sizeof out->unproven;
    size_t n = 0;
    out->unproven[0] = 0;
    for (int i = 0; i < run->n_unproven && n < size; i++)
        n += (size_t)snprintf(out->unproven + n, size - n, "%s%s/step_%06d", i ? ", " : "", run->o->save_dir,
                              run->unproven[i]);
}

void exec_checkpoint_saved(exec_run *run, const char *dir, int step) {
    pthread_mutex_lock(&run->saved_mu);
    snprintf(run->last_saved, sizeof run->last_saved, "%s", dir);
    if (run->n_unproven == EXEC_UNPROVEN_MAX) {
        memmove(run->unproven, run->unproven + 1, sizeof run->unproven[0] * (EXEC_UNPROVEN_MAX - 1));
        run->n_unproven--;
    }
    run->unproven[run->n_unproven++] = step;
    pthread_mutex_unlock(&run->saved_mu);
}

void exec_checkpoint_resumed(exec_run *run, const char *dir) {
    pthread_mutex_lock(&run->saved_mu);
    snprintf(run->last_saved, sizeof run->last_saved, "%s", dir);
    snprintf(run->good, sizeof run->good, "%s", dir);
    pthread_mutex_unlock(&run->saved_mu);
}

void exec_checkpoint_proven(exec_run *run, int version) {
    pthread_mutex_lock(&run->saved_mu);
    int k = 0;
    while (k < run->n_unproven && run->unproven[k] <= version) k++;
    if (k > 0) {
        snprintf(run->good, sizeof run->good, "%s/step_%06d", run->o->save_dir, run->unproven[k - 1]);
        memmove(run->unproven, run->unproven + k, sizeof run->unproven[0] * (size_t)(run->n_unproven - k));
        run->n_unproven -= k;
    }
    pthread_mutex_unlock(&run->saved_mu);
}

void exec_checkpoints(exec_run *run, train_checkpoints *out) {
    pthread_mutex_lock(&run->saved_mu);
    snprintf(out->good, sizeof out->good, "%s", run->good);
    list_unproven(run, out);
    out->validated = run->o->val_pattern != NULL;
    pthread_mutex_unlock(&run->saved_mu);
}

/* A tag: the message's kind in its low TAG_KIND_BITS bits, the low 16 bits of its index above them. */
enum { TAG_KIND_BITS = 4 };
_Static_assert(NB_MSG_KINDS <= 1 << TAG_KIND_BITS, "exec_tag packs a message's kind in TAG_KIND_BITS bits");
int exec_tag(const nb_low_action *a) { return (int)a->msg + (1 << TAG_KIND_BITS) * (a->index & 0xffff); }

static size_t list_length(const exec_endpoint *e) { return e->low->start[e->id + 1] - e->low->start[e->id]; }
static const nb_low_action *action_at(const exec_endpoint *e, size_t k) { return &e->low->actions[e->low->start[e->id] + k]; }

/* The run cut after `end` steps, lowered like the run. */
static int lower_cut(const exec_run *run, int end, nb_low_schedule *out) {
    nb_pipe_schedule cut, virt;
    if (nb_pipe_truncate(run->isc.start ? &run->isc : &run->sc, end, &cut)) return -1;
    int rc = 0;
    if (run->isc.start) {  /* interleaved: the cut of its workers' schedule, as virtual stages */
        rc = nb_pipe_virtualize(&cut, &virt);
        nb_pipe_free(&cut);
        if (rc) return -1;
        cut = virt;
    }
    rc = nb_pipe_lower(&cut, &run->low_opt, out);
    nb_pipe_free(&cut);
    return rc;
}

int exec_switch_end(exec_endpoint *e, int end) {
    if (end == e->end) return 0;
    const char *who = e->id == e->run->P ? "coordinator" : "stage";
    if (end > e->end) return nb_fail("%s %d: asked to end after step %d, already ending after %d", who, e->id, end, e->end);
    nb_low_free(&e->cut);
    if (lower_cut(e->run, end, &e->cut)) return -1;
    /* It has run actions 0 .. pos (this one included): the cut must have them too. */
    if (nb_low_common_prefix(e->low, &e->cut, e->id) <= e->pos)
        return nb_fail("%s %d: cannot end after step %d from action %zu of its list", who, e->id, end, e->pos);
    e->low = &e->cut;
    e->end = end;
    return 0;
}

/* Whether a run cut after `end` steps agrees with the whole run's lists up to where each endpoint
 * learns of the decision taken after step t: a stage where it receives END(t), the coordinator at
 * DECIDE(t). */
static int can_end(const exec_run *run, int t, int end, int *ok) {
    nb_low_schedule cut;
    if (lower_cut(run, end, &cut)) return -1;
    *ok = 1;
    for (int e = 0; e <= run->P && *ok; e++) {
        size_t at = e < run->P ? nb_low_find(&run->low, e, NB_LOW_RECV, NB_MSG_END, t + run->low.end_lag, t)
                               : nb_low_find(&run->low, e, NB_LOW_DECIDE, 0, t, 0);
        *ok = at != (size_t)-1 && nb_low_common_prefix(&run->low, &cut, e) > at;
    }
    nb_low_free(&cut);
    return 0;
}

int exec_stop_end(exec_run *run, int t) {
    for (int end = t + 1; end < run->S; end++) {
        int ok;
        if (can_end(run, t, end, &ok)) return -1;
        if (ok) return end;
    }
    return run->S;
}

static int step_action(exec_endpoint *e, const nb_low_action *a) {
    if (a->op != NB_LOW_SEND && a->op != NB_LOW_RECV) return e->act(e, a);
    /* Every replica but the first tells the coordinator nothing: replica 0's statistics are the run's (the sum
     * over replicas made them so), its stages write the checkpoint's parts, report and send the weights. */
    if (a->op == NB_LOW_SEND && e->run->replica > 0 && a->peer == e->run->P) return 0;
    void *data;
    size_t bytes;
    if (e->buffer(e, a, &data, &bytes)) return -1;
    if (a->op == NB_LOW_SEND) return nb_link_send(e->link, a->peer, exec_tag(a), data, bytes);
    if (nb_link_recv(e->link, a->peer, exec_tag(a), data, bytes)) return -1;
    return e->received ? e->received(e, a) : 0;
}

/* The others learn of the failure (their receives fail), then the caller. */
static int failed(exec_endpoint *e) {
    char why[1200];
    snprintf(why, sizeof why, "%s", nb_last_error());
    nb_link_fail(e->link, why);
    return nb_fail("%s", why);
}

static int drive_one(exec_endpoint *e) {
    for (e->pos = 0; e->pos < list_length(e); e->pos++)
        if (step_action(e, action_at(e, e->pos))) return failed(e);
    return 0;
}

static int is_compute(nb_low_op op) {
    return op == NB_LOW_FORWARD || op == NB_LOW_BACKWARD || op == NB_LOW_BACKWARD_INPUT || op == NB_LOW_BACKWARD_WEIGHT;
}

/* Runs e as far as its messages allow, at most `computes` compute actions (counted in *done, unless NULL):
 * 1 when it moved, 0 when not, -1 on failure. */
static int drive_limited(exec_endpoint *e, long computes, long *done) {
    int moved = 0;
    while (e->pos < list_length(e)) {
        const nb_low_action *a = action_at(e, e->pos);
        if (is_compute(a->op)) {
            if (!computes) break;
            computes--;
        } else if (a->op == NB_LOW_RECV) {
            int ready = nb_link_poll(e->link, a->peer, exec_tag(a));
            if (ready < 0) return -1;
            if (!ready) break;
        }
        if (step_action(e, a)) return failed(e), -1;
        if (done && is_compute(a->op)) ++*done;
        e->pos++;
        moved = 1;
    }
    return moved;
}

/* Every endpoint driven once (at most `computes` compute actions each, counted in done[i] unless done is
 * NULL): whether any moved and whether any has actions left; -1 on failure. */
static int drive_all(exec_endpoint **eps, int n, long computes, long *done, int *moved, int *running) {
    *running = 0;
    for (int i = 0; i < n; i++) {
        const int rc = drive_limited(eps[i], computes, done ? &done[i] : NULL);
        if (rc < 0) return -1;
        *moved |= rc;
        *running |= eps[i]->pos < list_length(eps[i]);
    }
    return 0;
}

/* No endpoint can move: each waits for a message. */
static int stuck(exec_endpoint **eps, int n, const char *why) {
    char buf[1024];
    size_t k = 0;
    for (int i = 0; i < n && k < sizeof buf; i++) {
        const exec_endpoint *e = eps[i];
        if (e->pos >= list_length(e)) continue;
        const nb_low_action *a = action_at(e, e->pos);
        k += (size_t)snprintf(buf + k, sizeof buf - k, "%s endpoint %d waits at action %zu for %s(%d) from %d", k ? ";" : "",
                              e->id, e->pos, nb_msg_kind_name(a->msg), a->index, a->peer);
    }
    return nb_fail("%s: %s", why, buf);
}

/* Nothing moved: fails after --peer-timeout without a message, else waits a little (after 5 ms of spinning). */
static int idle(exec_endpoint **eps, int n, double *idle_since) {
    const double timeout = eps[0]->run->o->peer_timeout, now = nb_now();
    if (!*idle_since) *idle_since = now;
    if (timeout > 0 && now - *idle_since > timeout) {
        stuck(eps, n, "no message for longer than --peer-timeout");
        return failed(eps[0]);
    }
    if (now - *idle_since > 0.005) nanosleep(&(struct timespec){0, 50000}, NULL);
    return 0;
}

int exec_drive(exec_endpoint **eps, int n, int all_local) {
    if (n == 1) return drive_one(eps[0]);
    for (int i = 0; i < n; i++) eps[i]->pos = 0;
    double idle_since = 0;
    for (;;) {
        int moved = 0, running = 0;
        if (drive_all(eps, n, LONG_MAX, NULL, &moved, &running)) return -1;
        if (!running) return 0;
        if (moved) {
            idle_since = 0;
            continue;
        }
        /* Every endpoint here waits: with no other endpoint anywhere, none ever will send. */
        if (all_local) {
            stuck(eps, n, "internal: the run's lists deadlock");
            return failed(eps[0]);
        }
        if (idle(eps, n, &idle_since)) return -1;
    }
}

/* How long the planned endpoint may wait while nothing moves before another one's compute runs. */
#define PLAN_PATIENCE_S 5.0

int exec_drive_planned(exec_endpoint **eps, int n, const exec_plan_step *plan, size_t plan_n, long *unplanned) {
    long done[64] = {0};
    *unplanned = 0;
    if (n > 64) return nb_fail("internal: a worker of %d endpoints (at most 64)", n);
    for (int i = 0; i < n; i++) eps[i]->pos = 0;
    double idle_since = 0;
    size_t next = 0;
    for (;;) {
        /* the plan's entries already run (out of order) or gone (a stop cut the lists) */
        while (next < plan_n && (done[plan[next].endpoint] > plan[next].ordinal ||
                                 eps[plan[next].endpoint]->pos >= list_length(eps[plan[next].endpoint])))
            next++;
        int moved = 0, running = 0, rc;
        if (next < plan_n) {  /* the planned compute, if its endpoint is at it */
            const int k = plan[next].endpoint;
            const long before = done[k];
            if ((rc = drive_limited(eps[k], done[k] == plan[next].ordinal ? 1 : 0, &done[k])) < 0) return -1;
            moved |= rc;
            if (done[k] > before) next++;
        }
        if (drive_all(eps, n, 0, done, &moved, &running)) return -1;  /* everything else that can run */
        if (!running) return 0;
        if (!moved && (next >= plan_n || (idle_since && nb_now() - idle_since > PLAN_PATIENCE_S))) {
            long before = 0, after = 0;  /* the plan is spent or stuck: any endpoint's next compute */
            for (int i = 0; i < n; i++) before += done[i];
            if (drive_all(eps, n, 1, done, &moved, &running)) return -1;
            for (int i = 0; i < n; i++) after += done[i];
            *unplanned += after - before;
        }
        if (moved) {
            idle_since = 0;
            continue;
        }
        if (idle(eps, n, &idle_since)) return -1;
    }
}
