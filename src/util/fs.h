/* Internal: the small file utilities every part that writes a folder shares: mkdir -p, atomic file
 * writes (a temporary, fsync, rename), whole-file reads, a run's lock on a folder, removing a
 * folder's files without ever following a symbolic link, and checking that a name given by a user or
 * read from a file stays in its folder. Each reports errors through nb_fail, naming the flag (e.g.
 * "--save-dir") and the path. */
#ifndef NB_UTIL_FS_H
#define NB_UTIL_FS_H
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>

/* mkdir -p: creates path and its missing parents. flag (may be NULL) names where path came from in
 * errors ("--save-dir PATH: cannot create ..."). A path that exists and is not a folder is an error. */
int nb_fs_mkdirs(const char *path, const char *flag);

/* A file written under a temporary name in the same folder (PATH.tmp.XXXXXX, mode 0644), then
 * flushed, fsync'ed and renamed over path, and the folder fsync'ed: readers see the old file or the
 * whole new one. Write to a.f between open and commit; abort removes the temporary. */
typedef struct { FILE *f; char *tmp; char *path; } nb_afile;
int nb_afile_open(nb_afile *a, const char *path);
int nb_afile_commit(nb_afile *a);    /* on failure the temporary file is removed */
void nb_afile_abort(nb_afile *a);
/* A whole buffer written atomically (nb_afile). */
int nb_fs_write_atomic(const char *path, const void *data, size_t n);
int nb_fs_fsync_dir(const char *dir);    /* the folder holding path entries */
char *nb_fs_dirname(const char *path);   /* malloc'ed; "." when there is no slash */
/* Opens path for reading when it is a regular file, without ever blocking on what it is: a FIFO,
 * folder, device or socket in its place is refused before anything is read, "WHAT PATH is a FIFO
 * (named pipe), not a regular file" (what may be NULL: "PATH is ..."). Returns a close-on-exec,
 * blocking descriptor (st, when not NULL, gets its fstat), or -1 (nb_fail). Every reader of a file a
 * user names goes through it (or the two below). */
int nb_fs_open_regular(const char *path, const char *what, struct stat *st);
/* The same, as a FILE* ("rb"); NULL on failure (nb_fail). */
FILE *nb_fs_fopen_regular(const char *path, const char *what);
/* Reads a whole file (NUL-terminated, *n excludes the NUL). what: how to name it in errors
 * (e.g. "--input"), may be NULL. */
int nb_fs_read_file(const char *path, char **data, size_t *n, const char *what);

/* The lock file a run holds in a folder it writes (--out, --save-dir) for its whole life. */
#define NB_FS_LOCK_NAME ".nobubble.lock"
typedef struct {
    int fd;            /* -1: not held */
    char path[4200];
} nb_fs_lock;
/* Takes DIR/.nobubble.lock (flock, exclusive, without waiting) and writes this process's pid into it.
 * Held already (another run names the folder): an error naming the flag, the folder and the other
 * run's pid. A lock already held by this process on the same folder (--out and --save-dir the same)
 * is not taken twice: lk stays unheld. */
int nb_fs_lock_dir(nb_fs_lock *lk, const char *dir, const char *flag);
/* Removes the lock file and releases the lock (no-op when not held). */
void nb_fs_unlock(nb_fs_lock *lk);
/* An unheld lock, for zero-initialized structures that nb_fs_unlock may see. */
void nb_fs_lock_init(nb_fs_lock *lk);

/* Whether path is a symbolic link (lstat: never follows it). */
int nb_fs_is_link(const char *path);
/* Whether dir/name is a regular file (lstat: a link there is not). */
int nb_fs_exists_in(const char *dir, const char *name);

/* Removes folder dir's entries for which match(name) holds, those named in first[0..n_first) before
 * any other, then dir itself if that leaves it empty. Never through a symbolic link: dir being a link
 * is refused (nb_fail naming it, nothing removed); entries are removed with unlinkat in the folder
 * opened O_NOFOLLOW, so an entry that is a link loses only the link. An absent dir is success.
 * what: how errors name dir ("checkpoint folder"). */
int nb_fs_remove_files(const char *dir, const char *const *first, int n_first, int (*match)(const char *name),
                       const char *what);

/* Whether name (a flag's value, or a name read from a file) can be joined to a folder without
 * leaving it: not empty, not "." or "..", no '/', no control characters, at most 200 bytes.
 * Otherwise an error "WHAT 'NAME': ..." (what: e.g. "--name"). */
int nb_fs_check_name(const char *name, const char *what);
#endif
