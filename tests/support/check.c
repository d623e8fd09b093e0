#include "check.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "nobubble/backend.h"
#include "util/error.h"

int check_passed, check_failed;

void check_record(int ok, const char *file, int line, const char *fmt, ...) {
    if (ok) { check_passed++; return; }
    check_failed++;
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int check_summary(void) {
    printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed == 0 && check_passed > 0 ? 0 : 1;
}

double check_rel_err_f(const float *a, const float *b, size_t n, double floor) {
    double maxdiff = 0, maxref = floor;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > maxdiff || isnan(d)) maxdiff = isnan(d) ? INFINITY : d;
        if (fabs((double)b[i]) > maxref) maxref = fabs((double)b[i]);
    }
    return maxdiff / maxref;
}

double check_rel_err_d(const float *a, const double *b, size_t n, double floor) {
    double maxdiff = 0, maxref = floor;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > maxdiff || isnan(d)) maxdiff = isnan(d) ? INFINITY : d;
        if (fabs(b[i]) > maxref) maxref = fabs(b[i]);
    }
    return maxdiff / maxref;
}

int check_run(const char *cmd) {
    int st = system(cmd);
    if (st == -1) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

unsigned char *check_slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = sz >= 0 ? malloc((size_t)sz + 1) : NULL;
    if (!p) {
        fclose(f);
        return NULL;
    }
    *n = fread(p, 1, (size_t)sz, f);
    fclose(f);
    p[*n] = 0;
    return p;
}

struct nb_backend *check_env_backend(int *exit_code) {
    nb_backend *be = NULL;
    if (!nb_backend_open(getenv("NB_GEMM"), &be)) return be;
    /* ":onednn" where oneDNN has no bf16 matmul (below AVX-512): refused at open, so nothing to test */
    if (strstr(nb_last_error(), "has no bf16 matmul")) {
        printf("skipped: NB_GEMM=%s: %s\n", getenv("NB_GEMM"), nb_last_error());
        *exit_code = 77;
        return NULL;
    }
    CHECK(0, "NB_GEMM: %s", nb_last_error());
    *exit_code = check_summary();
    return NULL;
}
