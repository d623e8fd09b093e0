/* The small file utilities (see fs.h). */
#define _GNU_SOURCE /* O_DIRECTORY, O_NOFOLLOW, O_CLOEXEC, flock, fdopendir */
#include "util/fs.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util/error.h"

/* "--save-dir PATH" or "PATH", for messages. */
static const char *flag_sep(const char *flag) { return flag ? " " : ""; }

int nb_fs_mkdirs(const char *path, const char *flag) {
    char buf[4096];
    const char *f = flag ? flag : "";
    if (!path[0]) return nb_fail("%s%s'': an empty folder name", f, flag_sep(flag));
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return nb_fail("%s%s%s: the path is too long", f, flag_sep(flag), path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/' && p[-1] != '/') {
            *p = 0;
            if (mkdir(buf, 0777) && errno != EEXIST)
                return nb_fail("%s%s%s: cannot create %s: %s", f, flag_sep(flag), path, buf, strerror(errno));
            *p = '/';
        }
    if (mkdir(buf, 0777) && errno != EEXIST)
        return nb_fail("%s%s%s: cannot create it: %s", f, flag_sep(flag), path, strerror(errno));
    struct stat st;
    if (stat(buf, &st) || !S_ISDIR(st.st_mode))
        return nb_fail("%s%s%s: exists and is not a folder", f, flag_sep(flag), path);
    return 0;
}

/* ------------------------------------------------------------ locks */
/* The lock files this process holds (their file's device and inode): flock locks belong to an open
 * file, so a second open of the same lock file in this process would find it "held by another". */
static pthread_mutex_t held_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct { dev_t dev; ino_t ino; int used; } held[32];

static int held_find(dev_t dev, ino_t ino) {
    for (int i = 0; i < (int)(sizeof held / sizeof held[0]); i++)
        if (held[i].used && held[i].dev == dev && held[i].ino == ino) return i;
    return -1;
}

static void held_set(dev_t dev, ino_t ino, int used) {
    int i = held_find(dev, ino);
    for (int k = 0; i < 0 && used && k < (int)(sizeof held / sizeof held[0]); k++)
        if (!held[k].used) i = k;
    if (i < 0) return;
    held[i].dev = dev;
    held[i].ino = ino;
    held[i].used = used;
}

void nb_fs_lock_init(nb_fs_lock *lk) {
    lk->fd = -1;
    lk->path[0] = 0;
}

/* The pid the lock file records (0: none yet). */
static long lock_owner(int fd) {
    char text[32] = "";
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    return n > 0 ? strtol(text, NULL, 10) : 0;
}

int nb_fs_lock_dir(nb_fs_lock *lk, const char *dir, const char *flag) {
    const char *f = flag ? flag : "folder";
    nb_fs_lock_init(lk);
    char path[sizeof lk->path];
    if (snprintf(path, sizeof path, "%s/%s", dir, NB_FS_LOCK_NAME) >= (int)sizeof path)
        return nb_fail("%s %s: the path is too long", f, dir);
    /* The run that held it removes the file as it releases it: a lock taken on a file that is no
     * longer at the path is no lock; take the new one. */
    for (int attempt = 0; attempt < 100; attempt++) {
        int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
            return nb_fail("%s %s: cannot open its lock file %s: %s%s", f, dir, path, strerror(errno),
                           errno == ELOOP ? " (a symbolic link: remove it)" : "");
        struct stat mine, now;
        if (fstat(fd, &mine)) {
            close(fd);
            return nb_fail("%s %s: cannot stat its lock file %s: %s", f, dir, path, strerror(errno));
        }
        pthread_mutex_lock(&held_mutex);
        int ours = held_find(mine.st_dev, mine.st_ino) >= 0;
        pthread_mutex_unlock(&held_mutex);
        if (ours) {  /* this run holds it already (--out and --save-dir the same folder) */
            close(fd);
            return 0;
        }
        if (flock(fd, LOCK_EX | LOCK_NB)) {
            int err = errno;
            long pid = lock_owner(fd);
            close(fd);
            if (err != EWOULDBLOCK) return nb_fail("%s %s: cannot lock %s: %s", f, dir, path, strerror(err));
            char who[64] = "another nobubble run";
            if (pid > 0) snprintf(who, sizeof who, "another nobubble run (pid %ld)", pid);
            return nb_fail("%s %s is in use by %s, which holds %s; give each run its own %s", f, dir, who, path, f);
        }
        if (lstat(path, &now) || now.st_dev != mine.st_dev || now.st_ino != mine.st_ino) {
            close(fd);
            continue;
        }
        char text[32];
        int n = snprintf(text, sizeof text, "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) || pwrite(fd, text, (size_t)n, 0) != n) {
            int err = errno;
            unlink(path);
            close(fd);
            return nb_fail("%s %s: cannot write its lock file %s: %s", f, dir, path, strerror(err));
        }
        pthread_mutex_lock(&held_mutex);
        held_set(mine.st_dev, mine.st_ino, 1);
        pthread_mutex_unlock(&held_mutex);
        lk->fd = fd;
        snprintf(lk->path, sizeof lk->path, "%s", path);
        return 0;
    }
    return nb_fail("%s %s: its lock file %s keeps being replaced", f, dir, path);
}

void nb_fs_unlock(nb_fs_lock *lk) {
    if (lk->fd < 0) return;
    struct stat mine, now;
    if (!fstat(lk->fd, &mine)) {
        /* Removed while still held, so that a run waiting on the old file retries on a new one. */
        if (!lstat(lk->path, &now) && now.st_dev == mine.st_dev && now.st_ino == mine.st_ino) unlink(lk->path);
        pthread_mutex_lock(&held_mutex);
        held_set(mine.st_dev, mine.st_ino, 0);
        pthread_mutex_unlock(&held_mutex);
    }
    close(lk->fd);
    nb_fs_lock_init(lk);
}

/* ------------------------------------------------------------ removing without following links */
int nb_fs_is_link(const char *path) {
    struct stat st;
    return !lstat(path, &st) && S_ISLNK(st.st_mode);
}

int nb_fs_exists_in(const char *dir, const char *name) {
    char path[4400];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return !lstat(path, &st) && S_ISREG(st.st_mode);
}

int nb_fs_remove_files(const char *dir, const char *const *first, int n_first, int (*match)(const char *name),
                       const char *what) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        if (nb_fs_is_link(dir))
            return nb_fail("%s %s is a symbolic link, not a folder nobubble wrote: refusing to delete through it "
                           "(remove the link yourself)", what, dir);
        return nb_fail("%s %s: cannot open it: %s", what, dir, strerror(errno));
    }
    for (int i = 0; i < n_first; i++) unlinkat(fd, first[i], 0);
    int fd2 = dup(fd);
    DIR *d = fd2 >= 0 ? fdopendir(fd2) : NULL;
    if (!d && fd2 >= 0) close(fd2);
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && match(e->d_name)) unlinkat(fd, e->d_name, 0);
    if (d) closedir(d);
    close(fd);
    rmdir(dir);   /* never follows a link; fails, leaving it, when anything else is in it */
    return 0;
}

/* ------------------------------------------------------------ names */
int nb_fs_check_name(const char *name, const char *what) {
    if (!name[0]) return nb_fail("%s '': expected a file name, got an empty one", what);
    if (!strcmp(name, ".") || !strcmp(name, ".."))
        return nb_fail("%s '%s': expected a file name, not a reference to a folder", what, name);
    if (strchr(name, '/'))
        return nb_fail("%s '%s': expected a file name without '/' (a name inside its folder, not a path)", what, name);
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        if (*c < 0x20 || *c == 0x7f) return nb_fail("%s: expected a file name without control characters", what);
    if (strlen(name) > 200) return nb_fail("%s '%.40s...': longer than 200 bytes", what, name);
    return 0;
}
/* ------------------------------------------------------------ atomic files, whole-file reads */
char *nb_fs_dirname(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    size_t n = (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, path, n);
    d[n] = 0;
    return d;
}

int nb_fs_fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY);
    if (fd < 0) return nb_fail("%s: cannot open folder: %s", dir, strerror(errno));
    fsync(fd);  /* some file systems refuse fsync on folders: not an error */
    close(fd);
    return 0;
}

int nb_afile_open(nb_afile *a, const char *path) {
    memset(a, 0, sizeof *a);
    size_t n = strlen(path);
    a->path = strdup(path);
    a->tmp = malloc(n + 16);
    if (!a->path || !a->tmp) {
        free(a->path);
        free(a->tmp);
        return nb_fail("out of memory");
    }
    snprintf(a->tmp, n + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(a->tmp);
    if (fd < 0) {
        int e = errno;
        free(a->path);
        free(a->tmp);
        a->path = a->tmp = NULL;
        return nb_fail("%s: cannot create a temporary file next to it: %s", path, strerror(e));
    }
    fchmod(fd, 0644);
    a->f = fdopen(fd, "wb");
    if (!a->f) {
        close(fd);
        unlink(a->tmp);
        free(a->path);
        free(a->tmp);
        a->path = a->tmp = NULL;
        return nb_fail("%s: fdopen failed", path);
    }
    return 0;
}

void nb_afile_abort(nb_afile *a) {
    if (a->f) fclose(a->f);
    if (a->tmp) unlink(a->tmp);
    free(a->tmp);
    free(a->path);
    memset(a, 0, sizeof *a);
}

int nb_afile_commit(nb_afile *a) {
    int bad = ferror(a->f) || fflush(a->f) != 0 || fsync(fileno(a->f)) != 0;
    int e = errno;
    if (fclose(a->f) != 0) bad = 1;
    a->f = NULL;
    if (bad) {
        nb_fail("%s: write failed: %s", a->path, strerror(e));
        nb_afile_abort(a);
        return -1;
    }
    if (rename(a->tmp, a->path) != 0) {
        nb_fail("%s: cannot rename the temporary file into place: %s", a->path, strerror(errno));
        nb_afile_abort(a);
        return -1;
    }
    char *dir = nb_fs_dirname(a->path);
    if (dir) nb_fs_fsync_dir(dir);
    free(dir);
    free(a->tmp);
    free(a->path);
    memset(a, 0, sizeof *a);
    return 0;
}

int nb_fs_write_atomic(const char *path, const void *data, size_t n) {
    nb_afile a;
    if (nb_afile_open(&a, path)) return -1;
    if (n && fwrite(data, 1, n, a.f) != n) {
        nb_fail("%s: write failed: %s", path, strerror(errno));
        nb_afile_abort(&a);
        return -1;
    }
    return nb_afile_commit(&a);
}

/* What st is, for the message refusing a file that is not a regular one. */
static const char *file_kind(const struct stat *st) {
    if (S_ISFIFO(st->st_mode)) return "a FIFO (named pipe)";
    if (S_ISDIR(st->st_mode)) return "a folder";
    if (S_ISCHR(st->st_mode)) return "a character device";
    if (S_ISBLK(st->st_mode)) return "a block device";
    if (S_ISSOCK(st->st_mode)) return "a socket";
    return "a special file";
}

int nb_fs_open_regular(const char *path, const char *what, struct stat *st) {
    const char *w = what ? what : "", *sep = what ? " " : "";
    /* O_NONBLOCK: a FIFO opens at once instead of waiting for a writer (a signal could not stop that
     * wait); O_NOCTTY: a terminal named here never becomes the controlling one. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return nb_fail("%s%s%s: cannot open: %s", w, sep, path, strerror(errno));
    struct stat own;
    if (!st) st = &own;
    if (fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        return nb_fail("%s%s%s: cannot stat: %s", w, sep, path, strerror(e));
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        return nb_fail("%s%s%s is %s, not a regular file", w, sep, path, file_kind(st));
    }
    /* A regular file never blocks; cleared anyway so that every read is an ordinary one. */
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

/* nb_fs_open_regular as a FILE*. */
static FILE *open_stream(const char *path, const char *what, struct stat *st) {
    int fd = nb_fs_open_regular(path, what, st);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        nb_fail("%s%s%s: fdopen failed: %s", what ? what : "", what ? " " : "", path, strerror(errno));
        close(fd);
    }
    return f;
}

FILE *nb_fs_fopen_regular(const char *path, const char *what) { return open_stream(path, what, NULL); }

int nb_fs_read_file(const char *path, char **data, size_t *n, const char *what) {
    const char *w = what ? what : "file";
    struct stat st;
    FILE *f = open_stream(path, w, &st);
    if (!f) return -1;
    size_t size = (size_t)st.st_size;
    char *p = malloc(size + 1);
    if (!p) {
        fclose(f);
        return nb_fail("%s %s: out of memory (%zu bytes)", w, path, size);
    }
    size_t got = fread(p, 1, size, f);
    int err = ferror(f);
    fclose(f);
    if (err || got != size) {
        free(p);
        return nb_fail("%s %s: read failed", w, path);
    }
    p[size] = 0;
    *data = p;
    *n = size;
    return 0;
}

