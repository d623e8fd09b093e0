/* The memory this process may still take (util/memory.h): the kernel's own figures, read from /proc and
 * the cgroup file system, never by allocating. */
#include "util/memory.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* The number after "key:" in a "Key:   value kB" file (/proc/meminfo, /proc/self/status), in bytes;
 * -1 when absent. */
static double kb_field(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    double v = -1;
    const size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') {
            v = 1024.0 * strtod(line + n + 1, NULL);
            break;
        }
    fclose(f);
    return v;
}

/* A file holding one number (cgroup files); -1 when absent or not a number ("max": no limit). */
static double number_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char text[64] = "";
    char *end;
    const int got = fgets(text, sizeof text, f) != NULL;
    fclose(f);
    const double v = got ? strtod(text, &end) : -1;
    return got && end != text ? v : -1;
}

/* Takes `room` as the answer when it is smaller, naming where it came from. */
static void consider(double room, const char *what, double *best, char *source, size_t size) {
    if (room < 0 || room >= *best) return;
    *best = room;
    snprintf(source, size, "%s", what);
}

/* Each cgroup from this process's up to the root: its limit less its usage (v2 memory.max, v1
 * memory.limit_in_bytes; v1's "no limit" is a huge number, which never wins). */
static void cgroup_room(double *best, char *source, size_t size) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *path = strchr(line, ':') ? strchr(strchr(line, ':') + 1, ':') : NULL;
        if (!path) continue;
        const int v2 = !strncmp(line, "0::", 3), v1 = strstr(line, ":memory:") != NULL;
        if (!v2 && !v1) continue;
        char dir[4400], file[4500], what[4600];
        snprintf(dir, sizeof dir, "%s%s", v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory", path + 1);
        for (;;) {
            snprintf(file, sizeof file, "%s/%s", dir, v2 ? "memory.max" : "memory.limit_in_bytes");
            const double limit = number_file(file);
            snprintf(file, sizeof file, "%s/%s", dir, v2 ? "memory.current" : "memory.usage_in_bytes");
            const double used = number_file(file);
            snprintf(what, sizeof what, "the cgroup limit %s/%s less its usage", dir,
                     v2 ? "memory.max" : "memory.limit_in_bytes");
            if (limit >= 0 && used >= 0) consider(limit > used ? limit - used : 0, what, best, source, size);
            char *slash = strrchr(dir, '/');
            if (!slash || !strcmp(dir, "/sys/fs/cgroup") || !strcmp(dir, "/sys/fs/cgroup/memory")) break;
            *slash = 0;
        }
    }
    fclose(f);
}

double nb_memory_available(char *source, size_t size) {
    double best = INFINITY;
    snprintf(source, size, "unknown");
    consider(kb_field("/proc/meminfo", "MemAvailable"), "MemAvailable", &best, source, size);
    cgroup_room(&best, source, size);
    struct rlimit as;
    if (!getrlimit(RLIMIT_AS, &as) && as.rlim_cur != RLIM_INFINITY) {
        const double vm = kb_field("/proc/self/status", "VmSize"), limit = (double)as.rlim_cur;
        consider(vm >= 0 && limit > vm ? limit - vm : 0, "RLIMIT_AS (ulimit -v) less the process's VmSize", &best,
                 source, size);
    }
    return best;
}

double nb_memory_peak_rss(void) {
    const double v = kb_field("/proc/self/status", "VmHWM");
    return v > 0 ? v : 0;
}
