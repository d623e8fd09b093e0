/* A very small test harness: CHECK records a failure with its location and goes on,
 * check_summary() prints "N passed, N failed" and gives the exit status. */
#ifndef NB_TESTS_CHECK_H
#define NB_TESTS_CHECK_H
#include <stddef.h>

extern int check_passed, check_failed;
void check_record(int ok, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int check_summary(void);

#define CHECK(cond, ...) check_record((cond) ? 1 : 0, __FILE__, __LINE__, __VA_ARGS__)

/* max |a - b| / max(max |b|, floor): a scale-aware relative error of a whole tensor */
double check_rel_err_f(const float *a, const float *b, size_t n, double floor);
double check_rel_err_d(const float *a, const double *b, size_t n, double floor);
/* The whole file, NUL-terminated (the terminator not counted in *n); NULL when it cannot be read.
 * free() it. */
unsigned char *check_slurp(const char *path, size_t *n);
/* Runs a shell command and returns its exit status (-1 when it could not be run). */
int check_run(const char *cmd);
/* The backend NB_GEMM names (NULL or "": the build's default), opened. NULL when it cannot be: *exit_code
 * is then 77, ctest's "skipped", where it is a ":onednn" that this CPU's oneDNN cannot run (the reason
 * printed), else the status check_summary gives after a failed CHECK. */
struct nb_backend *check_env_backend(int *exit_code);
#endif
