/* Every refusal the settings table can make is a usage error: `nobubble train` (NB_BIN) exits 2 with a
 * message that names the flag, for each row with a flag: a value just outside its range (both ends, as
 * the row states them, open or closed), a word where a number is expected, and an unknown name for a row
 * of names (docs/limits.md: exit 2 for a refused flag or setting, 1 for a file or a run that fails). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "check.h"
#include "nobubble/train.h"

static const char *bin;
static int cases;

/* Runs `train FLAG VALUE` (against no data: the flag is refused before any is read) and checks exit 2
 * and the flag in the message. */
static void refused(const nb_setting *s, const char *value, const char *why) {
    char cmd[1024], err[4096] = "";
    snprintf(cmd, sizeof cmd, "%s train --data /nonexistent-nobubble-data --steps 1 --quiet %s '%s' 2>&1 >/dev/null", bin,
             s->flag, value);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(err, 1, sizeof err - 1, p) : 0;
    err[n] = 0;
    const int status = p ? pclose(p) : -1;
    const int code = status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    cases++;
    CHECK(code == 2 && strstr(err, s->flag), "%s %s (%s): exit %d, expected 2 with the flag named: %.300s", s->flag,
          value, why, code, err);
}

static void format_number(const nb_setting *s, double v, char *out, size_t size) {
    if (s->type == NB_SET_INT || s->type == NB_SET_U64) snprintf(out, size, "%.0f", v);
    else snprintf(out, size, "%.17g", v);
}

static void check_row(const nb_setting *s) {
    char v[64];
    const int number = s->type == NB_SET_INT || s->type == NB_SET_U64 || s->type == NB_SET_FLOAT || s->type == NB_SET_DOUBLE;
    nb_range r;
    if (number && nb_setting_range(s, &r)) {   /* the row's own range, or its part's (nb_optim_ranges, ...) */
        const int whole = s->type == NB_SET_INT || s->type == NB_SET_U64;
        /* just below the lowest value allowed, and just above the highest */
        const double below = r.min_open ? r.min : whole ? r.min - 1 : r.min - fmax(1e-3, fabs(r.min) * 1e-3);
        const double above = r.max_open ? r.max : whole ? r.max + 1 : r.max + fmax(1e-3, fabs(r.max) * 1e-3);
        if (!(s->type == NB_SET_U64 && below < 0)) {
            format_number(s, below, v, sizeof v);
            refused(s, v, "below the range");
        }
        if (isfinite(above) && above < 1e300) {
            format_number(s, above, v, sizeof v);
            refused(s, v, "above the range");
        }
    }
    if (number) refused(s, "twelve", "a word");
    if (s->type == NB_SET_ENUM || s->type == NB_SET_DELAY) refused(s, "no-such-name", "an unknown name");
}

int main(void) {
    bin = getenv("NB_BIN");
    if (!bin) {
        CHECK(0, "NB_BIN (the nobubble binary) is not set");
        return check_summary();
    }
    for (int i = 0; i < nb_settings_count; i++)
        if (nb_settings[i].flag) check_row(&nb_settings[i]);
    CHECK(cases > 40, "%d refusals tried over the table's %d rows", cases, nb_settings_count);
    printf("%d refusals over %d rows\n", cases, nb_settings_count);
    return check_summary();
}
