/* Numeric ranges and enum names (util/range.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "util/error.h"
#include "util/range.h"

int nb_range_holds(const nb_range *r, double x) {
    return (r->min_open ? x > r->min : x >= r->min) && (r->max_open ? x < r->max : x <= r->max);
}

void nb_range_expected(const nb_range *r, char *buf, size_t size) {
    const char *what = r->integer ? "an integer" : "a number";
    if (!r->min_open && !r->max_open) snprintf(buf, size, "%s from %.10g to %.10g", what, r->min, r->max);
    else
        snprintf(buf, size, "%s in %c%.10g, %.10g%c", what, r->min_open ? '(' : '[', r->min, r->max,
                 r->max_open ? ')' : ']');
}

const nb_range *nb_range_at(const nb_range *table, size_t offset) {
    for (const nb_range *r = table; r->flag; r++)
        if (r->offset == offset) return r;
    return NULL;
}

int nb_range_check(const nb_range *r, const void *base) {
    const char *field = (const char *)base + r->offset;
    double x;
    char text[32], expected[96];
    if (r->integer) {
        int v;
        memcpy(&v, field, sizeof v);
        x = v;
        snprintf(text, sizeof text, "%d", v);
    } else {
        float v;
        memcpy(&v, field, sizeof v);
        x = v;
        snprintf(text, sizeof text, "%g", (double)v);
    }
    if (nb_range_holds(r, x)) return 0;
    nb_range_expected(r, expected, sizeof expected);
    return nb_fail("%s %s: out of range, expected %s", r->flag, text, expected);
}

int nb_names_find(nb_names_fn names, const char *text) {
    for (int v = 0; names(v); v++)
        if (!strcmp(names(v), text)) return v;
    return -1;
}

int nb_names_parse(nb_names_fn names, const char *flag, const char *text, int *out) {
    const int v = nb_names_find(names, text);
    if (v >= 0) {
        *out = v;
        return 0;
    }
    char list[256];
    nb_names_join(names, ", ", list, sizeof list);
    return nb_fail("%s '%s': expected one of %s", flag, text, list);
}

void nb_names_join(nb_names_fn names, const char *sep, char *buf, size_t size) {
    size_t at = 0;
    if (size) buf[0] = 0;
    for (int v = 0; names(v) && at < size; v++) {
        int n = snprintf(buf + at, size - at, "%s%s", v ? sep : "", names(v));
        if (n < 0) break;
        at += (size_t)n;
    }
}
