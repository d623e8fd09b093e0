/* Internal: the few dense linear-algebra routines nobubble needs beyond GEMM (SOAP's
 * eigenbases and QR, tests' singular values), on LAPACK's Fortran interface from the OpenBLAS
 * the project already links (so no second BLAS/LAPACK is loaded). Matrices are row-major
 * doubles; results are made canonical so that they do not depend on the LAPACK build. */
#ifndef NB_UTIL_LINALG_H
#define NB_UTIL_LINALG_H

/* Eigen-decomposition of the symmetric n x n matrix a (row-major). On success, column j of q
 * (row-major n x n) is the eigenvector of the j-th smallest eigenvalue w[j], its sign chosen
 * so that its entry of largest magnitude (the first such) is positive. */
int nb_sym_eig(int n, const double *a, double *q, double *w);
/* Q of the QR decomposition of the n x n matrix a (row-major), normalized so that R has a
 * positive diagonal (the unique QR of a full-rank matrix); written to q (row-major). */
int nb_qr_q(int n, const double *a, double *q);
/* Singular values (descending) of the m x n matrix a (row-major floats); s holds min(m, n). */
int nb_singular_values(int m, int n, const float *a, double *s);
#endif
