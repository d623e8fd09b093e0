/* Internal: how much memory this process may still take, from what the kernel says. */
#ifndef NB_UTIL_MEMORY_H
#define NB_UTIL_MEMORY_H
#include <stddef.h>

/* The smallest of: /proc/meminfo's MemAvailable; for each cgroup from this process's up to the root,
 * memory.max minus memory.current (v2) or memory.limit_in_bytes minus memory.usage_in_bytes (v1); and
 * RLIMIT_AS (ulimit -v) minus the process's VmSize. Its name into `source` ("MemAvailable",
 * "cgroup memory.max of /sys/fs/cgroup/...", "RLIMIT_AS"). INFINITY (and "unknown") when none can be
 * read. */
double nb_memory_available(char *source, size_t size);
/* The process's peak resident set (VmHWM), in bytes; 0 when unknown. */
double nb_memory_peak_rss(void);
#endif
