/* Measuring the machine's fp32 peak: a loop of independent fused multiply-adds on the widest
 * vectors the build targets, per thread, so that benchmarks report a fraction of a number
 * measured on the same machine in the same run. */
#ifndef NB_BACKEND_PEAK_H
#define NB_BACKEND_PEAK_H
/* GFLOP/s of `threads` threads running FMAs for about `seconds`; *isa receives the vector
 * instruction set used ("avx512", "avx2" or "scalar"). */
double nb_measure_fp32_peak(int threads, double seconds, const char **isa);
#endif
