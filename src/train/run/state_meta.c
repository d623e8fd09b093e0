/* The numbers of a training state's metadata, range-checked (state_meta.h). */
#include "train/run/state_meta.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "nobubble/train.h"
#include "util/error.h"

int state_meta_int(const char *where, const char *key, const char *v, long long lo, long long hi, long long *out) {
    *out = 0;
    if (!v) return nb_fail("%s: no metadata '%s'", where, key);
    const char *p = v;
    while (*p >= '0' && *p <= '9') p++;
    char *end;
    errno = 0;
    long long x = p > v && !*p ? strtoll(v, &end, 10) : -1;
    if (p == v || *p || errno || x < lo || x > hi)
        return nb_fail("%s: metadata '%s' = '%.40s' is not an integer from %lld to %lld", where, key, v, lo, hi);
    *out = x;
    return 0;
}

int state_meta_steps(const nb_st_set *set, state_meta *m) {
    const nb_st_file *head = &set->files[0];
    m->next_step = m->optimizer_steps = 0;
    if (state_meta_int(head->path, "next_step", nb_st_meta(head, "next_step"), 0, NB_TRAIN_MAX_STEPS, &m->next_step))
        return -1;
    for (int i = 1; i < set->n; i++) {
        long long other;
        const nb_st_file *f = &set->files[i];
        if (state_meta_int(f->path, "next_step", nb_st_meta(f, "next_step"), 0, NB_TRAIN_MAX_STEPS, &other)) return -1;
        if (other != m->next_step)
            return nb_fail("%s is of step %lld, %s of step %lld: parts of two checkpoints", f->path, other, head->path,
                           m->next_step);
    }
    return state_meta_int(head->path, "optimizer_steps", nb_st_meta(head, "optimizer_steps"), 0, m->next_step,
                          &m->optimizer_steps);
}

int state_meta_count(const nb_st_set *set, const char *where, const state_meta *m, const char *name, long long *out) {
    char key[320];
    if ((size_t)snprintf(key, sizeof key, "count:%s", name) >= sizeof key)
        return nb_fail("%s: tensor name '%.64s...' is too long", where, name);
    return state_meta_int(where, key, nb_st_set_meta(set, key), 0, m->optimizer_steps, out);
}

int state_meta_loader(const nb_st_file *f, long long batch, long long seq, unsigned long long *position) {
    long long pos, saved_batch, saved_seq;
    if (state_meta_int(f->path, "loader_position", nb_st_meta(f, "loader_position"), 0, STATE_MAX_LOADER_POSITION, &pos) ||
        state_meta_int(f->path, "run.batch", nb_st_meta(f, "run.batch"), 1, NB_TRAIN_MAX_BATCH, &saved_batch) ||
        state_meta_int(f->path, "run.seq", nb_st_meta(f, "run.seq"), 1, STATE_MAX_SEQ, &saved_seq))
        return -1;
    if (batch < 1 || seq < 1) return nb_fail("batch %lld x seq %lld: expected positive sizes", batch, seq);
    /* With another batch shape (--override), the position that has seen about as many tokens: at most
     * 2^48 x 2^16 x 2^20 = 2^84 in double, so bounded before the cast. */
    double tokens = (double)saved_batch * (double)saved_seq, now = (double)batch * (double)seq;
    double scaled = tokens == now ? (double)pos : (double)pos * tokens / now;
    if (!(scaled <= (double)STATE_MAX_LOADER_POSITION))
        return nb_fail("%s: loader_position %lld of %lld x %lld tokens is %.3g micro-batches of this run's %lld x %lld: "
                       "past %lld", f->path, pos, saved_batch, saved_seq, scaled, batch, seq, STATE_MAX_LOADER_POSITION);
    *position = tokens == now ? (unsigned long long)pos : (unsigned long long)scaled;
    return 0;
}
