/* Bounds on inputs, at the library's level (tests/cli_bounds.sh drives the same through the command
 * line): nb_fail given nb_last_error() as an argument, config.json's error messages, the batch-shape
 * bound, a training state's metadata numbers, the schedule's lr-min, and grids nothing would run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "nobubble/checkpoint.h"
#include "nobubble/experiments.h"
#include "nobubble/model.h"
#include "nobubble/optim.h"
#include "train/run/state_meta.h"
#include "util/error.h"

static int occurrences(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

static void test_nb_fail_reads_itself(void) {
    nb_fail("inner %d", 42);
    nb_fail("%s: %s", "outer", nb_last_error());
    CHECK(!strcmp(nb_last_error(), "outer: inner 42"), "nb_fail(\"%%s: %%s\", x, nb_last_error()): got '%s'",
          nb_last_error());
    nb_fail("%s and %s", nb_last_error(), nb_last_error());
    CHECK(!strcmp(nb_last_error(), "outer: inner 42 and outer: inner 42"), "twice: got '%s'", nb_last_error());
}

static void test_config_json_message(void) {
    char dir[] = "/tmp/nb_test_bounds_XXXXXX", path[256];
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 25, \"intermediate_size\": 36, "
               "\"max_position_embeddings\": 12, \"num_attention_heads\": 2, \"num_hidden_layers\": 2, "
               "\"num_key_value_heads\": 1, \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, "
               "\"tie_word_embeddings\": true, \"vocab_size\": 53}\n");
    fclose(f);
    nb_config c;
    CHECK(nb_hf_read_config(dir, &c) != 0, "hidden_size 25 with 2 heads refused");
    const char *e = nb_last_error();
    CHECK(occurrences(e, "config.json") == 1 && strstr(e, "d_model = 25 is not divisible by n_heads = 2"),
          "the message names config.json once and the problem: '%s'", e);
    unlink(path);
    rmdir(dir);
}

static void test_batch_shape(void) {
    nb_config c;
    nb_config_preset("tiny", &c);
    CHECK(nb_config_check_batch(&c, 8, c.context) == 0, "tiny, batch 8 x context fits");
    CHECK(nb_config_check_batch(&c, 0, c.context) != 0 && strstr(nb_last_error(), "--batch 0"), "batch 0: %s",
          nb_last_error());
    CHECK(nb_config_check_batch(&c, 1, c.context + 1) != 0 && strstr(nb_last_error(), "--seq"), "seq past the context");
    CHECK(nb_config_check_batch(&c, 65536, c.context) != 0 && strstr(nb_last_error(), "too large"),
          "65536 sequences of tiny's logits: %s", nb_last_error());
    c.n_layers = 100000;
    CHECK(nb_config_validate(&c) != 0 && strstr(nb_last_error(), "n_layers = 100000"), "n_layers 100000: %s",
          nb_last_error());
}

static void test_state_meta(void) {
    long long x;
    CHECK(state_meta_int("f", "count:w", "12", 0, 100, &x) == 0 && x == 12, "12 in [0, 100]");
    static const char *const bad[] = {"9223372036854775807", "99999999999999999999999", "-1", "101", " 1", "1 ", "",
                                      "0x10", "1e3", "+5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(state_meta_int("f", "count:w", bad[i], 0, 100, &x) != 0 &&
                  strstr(nb_last_error(), "f: metadata 'count:w'") && strstr(nb_last_error(), "from 0 to 100"),
              "'%s' refused: %s", bad[i], nb_last_error());
    }
    CHECK(state_meta_int("f", "next_step", NULL, 0, 100, &x) != 0 && strstr(nb_last_error(), "no metadata 'next_step'"),
          "missing key");
}

static void test_lr_min(void) {
    nb_schedule s = {0};
    s.kind = NB_SCHEDULE_COSINE;
    s.lr = 1e-3f;
    s.lr_min = 1e-4f;
    CHECK(nb_schedule_validate(&s) == 0, "lr-min below lr");
    s.lr_min = 1e-2f;
    CHECK(nb_schedule_validate(&s) != 0 && strstr(nb_last_error(), "--lr-min"), "lr-min above lr: %s", nb_last_error());
}

static void test_grids(void) {
    static const char *const refused[][2] = {
        {"", "empty grid"},
        {"# nothing but a comment\n\n", "empty grid"},
        {"fixed:\n", "empty grid"},
        {"fixed: --resume=ck\n", "--resume=ck"},
        {"fixed: --out=x\n", "--out=x"},
        {"axis a: resume other\nfixed: --{a}=x\n", "--resume=x"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        nb_grid *g = NULL;
        int rc = nb_grid_parse(&g, refused[i][0], "g.grid");
        CHECK(rc != 0 && strstr(nb_last_error(), refused[i][1]), "grid '%s' refused: %s", refused[i][0],
              rc ? nb_last_error() : "accepted");
        nb_grid_free(g);
    }
    nb_grid *g = NULL;
    CHECK(nb_grid_parse(&g, "fixed: --steps 2\n", "g.grid") == 0 && nb_grid_n_points(g) == 1, "one fixed point");
    nb_grid_free(g);
}

int main(void) {
    test_nb_fail_reads_itself();
    test_config_json_message();
    test_batch_shape();
    test_state_meta();
    test_lr_min();
    test_grids();
    return check_summary();
}
