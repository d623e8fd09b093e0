/* Decimal numbers only (see decimal.h). */
#include "util/decimal.h"

static const char *digits(const char *p, int *n) {
    *n = 0;
    while (*p >= '0' && *p <= '9') p++, ++*n;
    return p;
}

int nb_is_decimal(const char *text, int integer) {
    const char *p = text;
    int whole, frac = 0, exp = 1;
    if (*p == '+' || *p == '-') p++;
    p = digits(p, &whole);
    if (integer) return whole > 0 && !*p;
    if (*p == '.') p = digits(p + 1, &frac);
    if (whole + frac == 0) return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        p = digits(p, &exp);
    }
    return exp > 0 && !*p;
}
