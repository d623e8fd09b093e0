/* Fuzz inputs as files (see fuzz_input.h). Failing to write the scratch file is the environment's fault,
 * not the target's: the process exits with a message rather than reporting a finding. */
#define _POSIX_C_SOURCE 200809L
#include "fuzz_input.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[512], path[640], last_name[64];

static void cleanup(void) {
    if (last_name[0]) unlink(path);
    if (dir[0]) rmdir(dir);
}

const char *fuzz_dir(void) {
    if (dir[0]) return dir;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/nb_fuzz_XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("fuzz: mkdtemp");
        exit(2);
    }
    atexit(cleanup);
    return dir;
}

const char *fuzz_write(const uint8_t *data, size_t size, const char *name) {
    if (last_name[0] && strcmp(last_name, name)) unlink(path);
    snprintf(last_name, sizeof last_name, "%s", name);
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    size_t done = 0;
    while (fd >= 0 && done < size) {
        ssize_t k = write(fd, data + done, size - done);
        if (k <= 0) break;
        done += (size_t)k;
    }
    if (fd < 0 || done != size || close(fd) != 0) {
        perror("fuzz: writing the input file");
        exit(2);
    }
    return path;
}
