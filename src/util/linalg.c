#include "util/linalg.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "util/error.h"

/* LAPACK's Fortran interface: every argument by reference, column-major matrices. */
extern void dsyevd_(const char *jobz, const char *uplo, const int *n, double *a, const int *lda, double *w,
                    double *work, const int *lwork, int *iwork, const int *liwork, int *info);
extern void dgeqrf_(const int *m, const int *n, double *a, const int *lda, double *tau, double *work,
                    const int *lwork, int *info);
extern void dorgqr_(const int *m, const int *n, const int *k, double *a, const int *lda, const double *tau,
                    double *work, const int *lwork, int *info);
extern void dgesdd_(const char *jobz, const int *m, const int *n, double *a, const int *lda, double *s, double *u,
                    const int *ldu, double *vt, const int *ldvt, double *work, const int *lwork, int *iwork,
                    int *info);

int nb_sym_eig(int n, const double *a, double *q, double *w) {
    /* A symmetric matrix is its own transpose: row-major a is a valid column-major input. */
    double *z = malloc(sizeof(double) * (size_t)n * n), wq;
    int lwork = -1, liwork = -1, iwq, info;
    if (!z) return nb_fail("out of memory (eigen-decomposition of %d x %d)", n, n);
    memcpy(z, a, sizeof(double) * (size_t)n * n);
    dsyevd_("V", "U", &n, z, &n, w, &wq, &lwork, &iwq, &liwork, &info);
    lwork = (int)wq;
    liwork = iwq;
    double *work = malloc(sizeof(double) * (size_t)lwork);
    int *iwork = malloc(sizeof(int) * (size_t)liwork);
    if (!work || !iwork) info = -1000;
    else dsyevd_("V", "U", &n, z, &n, w, work, &lwork, iwork, &liwork, &info);
    free(work);
    free(iwork);
    if (info) {
        free(z);
        return nb_fail("eigen-decomposition of a %d x %d matrix failed (LAPACK dsyevd info %d)", n, n, info);
    }
    /* Column-major z: eigenvector j is z[j*n .. j*n + n). */
    for (int j = 0; j < n; j++) {
        const double *v = z + (size_t)j * n;
        int big = 0;
        for (int i = 1; i < n; i++)
            if (fabs(v[i]) > fabs(v[big])) big = i;
        double sign = v[big] < 0 ? -1.0 : 1.0;
        for (int i = 0; i < n; i++) q[(size_t)i * n + j] = sign * v[i];
    }
    free(z);
    return 0;
}

int nb_qr_q(int n, const double *a, double *q) {
    double *c = malloc(sizeof(double) * (size_t)n * n), *tau = malloc(sizeof(double) * (size_t)n), wq;
    int lwork = -1, info;
    if (!c || !tau) {
        free(c);
        free(tau);
        return nb_fail("out of memory (QR of %d x %d)", n, n);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) c[(size_t)j * n + i] = a[(size_t)i * n + j];
    dgeqrf_(&n, &n, c, &n, tau, &wq, &lwork, &info);
    lwork = (int)wq;
    double *work = malloc(sizeof(double) * (size_t)(lwork > n * 64 ? lwork : n * 64));
    if (!work) info = -1000;
    else {
        lwork = lwork > n * 64 ? lwork : n * 64;
        dgeqrf_(&n, &n, c, &n, tau, work, &lwork, &info);
    }
    char *flip = calloc((size_t)n, 1);
    if (!info && flip)
        for (int j = 0; j < n; j++)
            if (c[(size_t)j * n + j] < 0) flip[j] = 1;
    if (!info) dorgqr_(&n, &n, &n, c, &n, tau, work, &lwork, &info);
    free(work);
    free(tau);
    if (info || !flip) {
        free(c);
        free(flip);
        return nb_fail("QR of a %d x %d matrix failed (LAPACK info %d)", n, n, info);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) q[(size_t)i * n + j] = (flip[j] ? -1.0 : 1.0) * c[(size_t)j * n + i];
    free(flip);
    free(c);
    return 0;
}

int nb_singular_values(int m, int n, const float *a, double *s) {
    int k = m < n ? m : n, lwork = -1, info;
    double *c = malloc(sizeof(double) * (size_t)m * n), wq;
    int *iwork = malloc(sizeof(int) * 8 * (size_t)k);
    if (!c || !iwork) {
        free(c);
        free(iwork);
        return nb_fail("out of memory (singular values of %d x %d)", m, n);
    }
    /* Row-major m x n read as column-major is its transpose: same singular values. */
    for (size_t i = 0; i < (size_t)m * n; i++) c[i] = a[i];
    int cm = n, cn = m, one = 1;
    double dummy;
    dgesdd_("N", &cm, &cn, c, &cm, s, &dummy, &one, &dummy, &one, &wq, &lwork, iwork, &info);
    lwork = (int)wq;
    double *work = malloc(sizeof(double) * (size_t)lwork);
    if (!work) info = -1000;
    else dgesdd_("N", &cm, &cn, c, &cm, s, &dummy, &one, &dummy, &one, work, &lwork, iwork, &info);
    free(work);
    free(iwork);
    free(c);
    if (info) return nb_fail("singular values of a %d x %d matrix failed (LAPACK info %d)", m, n, info);
    return 0;
}
