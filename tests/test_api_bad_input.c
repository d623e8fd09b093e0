/* Public calls given values the headers do not allow: each returns an error naming what is wrong, instead
 * of crashing later or returning a result that is not what was asked. */
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "nobubble/delay.h"
#include "nobubble/model.h"
#include "nobubble/train.h"

static void test_stash_refuses_what_tau_max_cannot_use(void) {
    float w[4] = {1, 2, 3, 4};
    nb_stash *s = (nb_stash *)1;
    nb_delay_options d = {.mode = NB_DELAY_FIXED, .tau = -2};
    CHECK(nb_stash_create(&s, &d, 0, 2, 10, w, 4) && !s && strstr(nb_last_error(), "fixed:-2"), "stash: fixed:-2");
    d.tau = 2000000;
    CHECK(nb_stash_create(&s, &d, 0, 2, 10, w, 4) && strstr(nb_last_error(), "fixed:2000000"), "stash: fixed:2000000");
    d = (nb_delay_options){.mode = NB_DELAY_PIPEDREAM};
    CHECK(nb_stash_create(&s, &d, 5, 2, 10, w, 4) && strstr(nb_last_error(), "stage 5 of 2"), "stash: stage 5 of 2");
    CHECK(nb_stash_create(&s, &d, 0, 0, 10, w, 4) && strstr(nb_last_error(), "stage 0 of 0"), "stash: 0 stages");
    CHECK(nb_stash_create(&s, &d, 0, 2, 10, NULL, 4) && strstr(nb_last_error(), "w0 is NULL"), "stash: no weights");
    d.mode = (nb_delay_mode)9;
    CHECK(nb_stash_create(&s, &d, 0, 2, 10, w, 4) && strstr(nb_last_error(), "mode 9"), "stash: mode 9");
    CHECK(nb_delay_validate(&d, 10, 2) && strstr(nb_last_error(), "mode 9"), "nb_delay_validate: mode 9");
    d.mode = NB_DELAY_PIPEDREAM;
    CHECK(!nb_stash_create(&s, &d, 0, 2, 10, w, 4) && s && nb_stash_tau(s, 5) == 1 &&
              nb_stash_weights(s, w, 5) != w, "stash: pipedream stage 0 of 2 keeps one version");
    nb_stash_free(s);
}

static void test_find_checkpoint_does_not_cut_the_path(void) {
    char out[8];
    CHECK(nb_train_find_checkpoint("/tmp/no-such-folder-nb", out, sizeof out) &&
              strstr(nb_last_error(), "longer than the 8 bytes"), "nb_train_find_checkpoint: a path cut to 8 bytes");
    char big[256];
    CHECK(!nb_train_find_checkpoint("/tmp/no-such-folder-nb", big, sizeof big) && !strcmp(big, "/tmp/no-such-folder-nb"),
          "nb_train_find_checkpoint: not a save folder, the path as given");
}

/* A backward reads what its slot's forward kept: a slot with no forward of its stage is refused, not turned
 * into gradients of whatever the slot's memory holds. */
static void test_backward_needs_a_forward_of_its_stage(void) {
    nb_config cfg;
    CHECK(!nb_config_preset("tiny", &cfg), "preset");
    cfg.n_layers = 2;
    nb_model m;
    int blocks[2] = {1, 1};
    CHECK(!nb_model_create(&m, &cfg, 2, blocks, NULL) && !nb_model_init(&m, 3), "model");
    nb_stage *first = &m.stages[0], *last = &m.stages[1];
    nb_acts *a = nb_acts_create(first, 1, 4), *b = nb_acts_create(last, 1, 4);
    int tokens[4] = {1, 2, 3, 4}, bad[4] = {1, 2, -7, 4};
    float dout[4 * 512] = {0};
    CHECK(a && b && cfg.d_model <= 512, "slots");
    CHECK(nb_stage_backward(first, first->params, 0, a, dout, 1.0f) && strstr(nb_last_error(), "stage 0, backward") &&
              strstr(nb_last_error(), "none ran"), "backward before any forward: %s", nb_last_error());
    CHECK(!nb_stage_forward(first, first->params, 0, a, tokens, NULL, NULL, NULL), "forward: %s", nb_last_error());
    CHECK(!nb_stage_backward(first, first->params, 0, a, dout, 1.0f), "backward after the forward: %s", nb_last_error());
    CHECK(nb_stage_backward(last, last->params, 0, a, dout, 1.0f) && strstr(nb_last_error(), "another stage"),
          "stage 1's backward of stage 0's slot: %s", nb_last_error());
    CHECK(nb_stage_forward(first, first->params, 0, a, bad, NULL, NULL, NULL) && strstr(nb_last_error(), "-7"),
          "forward of a token outside the vocabulary");
    CHECK(nb_stage_backward(first, first->params, 0, a, dout, 1.0f) && strstr(nb_last_error(), "failed"),
          "backward after a failed forward: %s", nb_last_error());
    nb_acts_free(a);
    nb_acts_free(b);
    nb_model_free(&m);
}

int main(void) {
    test_backward_needs_a_forward_of_its_stage();
    test_stash_refuses_what_tau_max_cannot_use();
    test_find_checkpoint_does_not_cut_the_path();
    return check_summary();
}
