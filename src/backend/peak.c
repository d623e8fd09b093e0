#include "backend/peak.h"
#include "util/clock.h"
#include <omp.h>
#include <time.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif


/* 12 independent accumulators hide the FMA latency (4 cycles x 2 or more pipes).
 * Returns the flops done; sink keeps the compiler from dropping the work. */
static double fma_loop(long iters, float *sink) {
#if defined(__AVX512F__)
    __m512 acc[12], x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
    for (int k = 0; k < 12; k++) acc[k] = _mm512_set1_ps((float)k);
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < 12; k++) acc[k] = _mm512_fmadd_ps(acc[k], x, y);
    float s = 0;
    for (int k = 0; k < 12; k++) s += _mm512_reduce_add_ps(acc[k]);
    *sink = s;
    return 2.0 * 16 * 12 * (double)iters;
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 acc[12], x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
    for (int k = 0; k < 12; k++) acc[k] = _mm256_set1_ps((float)k);
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < 12; k++) acc[k] = _mm256_fmadd_ps(acc[k], x, y);
    float buf[8], s = 0;
    for (int k = 0; k < 12; k++) {
        _mm256_storeu_ps(buf, acc[k]);
        for (int j = 0; j < 8; j++) s += buf[j];
    }
    *sink = s;
    return 2.0 * 8 * 12 * (double)iters;
#else
    float acc[12];
    for (int k = 0; k < 12; k++) acc[k] = (float)k;
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < 12; k++) acc[k] = acc[k] * 0.999999f + 1e-7f;
    float s = 0;
    for (int k = 0; k < 12; k++) s += acc[k];
    *sink = s;
    return 2.0 * 12 * (double)iters;
#endif
}

double nb_measure_fp32_peak(int threads, double seconds, const char **isa) {
#if defined(__AVX512F__)
    *isa = "avx512";
#elif defined(__AVX2__) && defined(__FMA__)
    *isa = "avx2";
#else
    *isa = "scalar";
#endif
    float sink = 0;
    long iters = 1000;
    double t0 = nb_now();
    fma_loop(iters, &sink);
    /* Grow the count until one run takes a tenth of the budget, then time the full budget. */
    while (nb_now() - t0 < seconds / 10) {
        iters *= 2;
        t0 = nb_now();
        fma_loop(iters, &sink);
    }
    iters = (long)(iters * 10 / 3);
    /* The best of three: on a shared machine a neighbour can only make a run slower. */
    double best = 0;
    for (int trial = 0; trial < 3; trial++) {
        double flops = 0, start = nb_now();
#pragma omp parallel num_threads(threads) reduction(+ : flops)
        {
            float local;
            flops += fma_loop(iters, &local);
            if (local == 12345.0f) sink = local;
        }
        double rate = flops / (nb_now() - start) * 1e-9;
        best = rate > best ? rate : best;
    }
    (void)sink;
    return best;
}
