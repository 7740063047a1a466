/* gm_out.c: output files that are either their old selves or complete (see gm_base.h).
 *
 * Every tool's output file goes through here: a trace import, a results file, an HTML or CSV
 * report. The bytes go to a temporary file in the target's directory (a rename is atomic only
 * within one file system), which is flushed, fsync'd and renamed over the target only when
 * every write succeeded; on any failure it is removed and the target is left as it was. So a
 * full disk, a read-only directory or a process killed halfway never leaves a half-written or
 * empty output under the user's name, and never deletes an older one. A kill leaves the
 * temporary file (".NAME.tmp-PID-N" beside the target), which nothing else uses.
 *
 * Writes through the stdio stream are checked one by one: the stream writes through a cookie
 * (fopencookie) that keeps the first write error with its errno, which plain stdio would fold
 * into a bare ferror() flag. Targets that are not regular files (/dev/stdout, /dev/full, a
 * FIFO) cannot be replaced by a rename and are written in place, still checked. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/gm_base.h"

struct gm_out {
  char *path;  /* the target (symlinks resolved) */
  char *tmp;   /* the temporary file, NULL when writing in place */
  int fd;
  FILE *f;
  int err_no;  /* first write error (errno), 0 if none */
};

/* A failed write is remembered (gm_out_commit fails the output with it) and the rest is
 * swallowed: the stream is never told. glibc's stdio, told of a failure by a cookie's write in
 * the middle of a large fprintf, can copy past its buffer's end (seen with ASan on /dev/full:
 * a 51 KB fprintf through an 8 KiB buffer), and nothing written after a failure is kept anyway. */
static ssize_t cookie_write(void *c, const char *buf, size_t n) {
  gm_out_t *o = c;
  size_t done = 0;
  while (done < n && !o->err_no) {
    ssize_t k = write(o->fd, buf + done, n - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      o->err_no = k < 0 ? errno : EIO;
      break;
    }
    done += (size_t)k;
  }
  return (ssize_t)n;
}

static int cookie_close(void *c) {
  (void)c; /* gm_out_commit closes the descriptor itself, after fsync */
  return 0;
}

/* The file a path names: symlinks followed, so the rename replaces the target, not the link. */
static char *target_of(const char *path) {
  struct stat sb;
  if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode)) {
    char *r = realpath(path, NULL);
    if (r) return r;
  }
  return strdup(path);
}

gm_status_t gm_out_open(gm_out_t **out, const char *path, gm_err_t *err) {
  *out = NULL;
  gm_out_t *o = calloc(1, sizeof *o);
  if (!o || !(o->path = target_of(path))) {
    free(o);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  o->fd = -1;
  struct stat sb;
  int exists = stat(o->path, &sb) == 0;
  if (exists && !S_ISREG(sb.st_mode)) {
    if (S_ISDIR(sb.st_mode)) {
      gm_out_abort(o);
      return gm_err_set(err, GM_ERR_IO, "cannot write '%s': it is a directory", path);
    }
    o->fd = open(o->path, O_WRONLY | O_CLOEXEC);
    if (o->fd < 0) {
      int e = errno;
      gm_out_abort(o);
      return gm_err_set(err, GM_ERR_IO, "cannot write '%s': %s", path, strerror(e));
    }
    *out = o;
    return GM_OK;
  }
  char *copy = strdup(o->path), *copy2 = strdup(o->path);
  if (!copy || !copy2) {
    free(copy);
    free(copy2);
    gm_out_abort(o);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  const char *dir = dirname(copy), *base = basename(copy2);
  static atomic_uint counter;
  size_t n = strlen(dir) + strlen(base) + 64;
  o->tmp = malloc(n);
  int e = ENOMEM;
  for (int attempt = 0; o->tmp && attempt < 100; attempt++) {
    snprintf(o->tmp, n, "%s/.%s.tmp-%ld-%u", dir, base, (long)getpid(), atomic_fetch_add(&counter, 1));
    /* 0666 less the umask, as any new file; the old file's mode when replacing one */
    o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (o->fd >= 0 || errno != EEXIST) break;
  }
  if (o->fd < 0) e = errno;
  if (o->fd >= 0 && exists) (void)fchmod(o->fd, sb.st_mode & 07777);
  if (o->fd < 0) {
    gm_err_set(err, GM_ERR_IO, "cannot write '%s': cannot create a file in '%s': %s", path, dir, strerror(e));
    free(copy);
    free(copy2);
    free(o->tmp);
    o->tmp = NULL; /* nothing to remove */
    gm_out_abort(o);
    return GM_ERR_IO;
  }
  free(copy);
  free(copy2);
  *out = o;
  return GM_OK;
}

FILE *gm_out_file(gm_out_t *o) {
  if (!o->f) {
    cookie_io_functions_t io = {NULL, cookie_write, NULL, cookie_close};
    o->f = fopencookie(o, "w", io);
    if (o->f) setvbuf(o->f, NULL, _IOFBF, 1 << 16);
  }
  return o->f;
}

int gm_out_fd(gm_out_t *o) { return o->fd; }

const char *gm_out_path(const gm_out_t *o) { return o->path; }

static void discard(gm_out_t *o) {
  if (o->f) fclose(o->f);
  if (o->fd >= 0) close(o->fd);
  if (o->tmp) unlink(o->tmp);
  free(o->tmp);
  free(o->path);
  free(o);
}

void gm_out_abort(gm_out_t *o) {
  if (o) discard(o);
}

/* Make the rename itself durable (best effort: some file systems cannot sync a directory). */
static void sync_dir(const char *path) {
  char *copy = strdup(path);
  if (!copy) return;
  int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    (void)fsync(fd);
    close(fd);
  }
  free(copy);
}

gm_status_t gm_out_commit(gm_out_t *o, gm_err_t *err) {
  if (!o) return gm_err_set(err, GM_ERR_INVAL, "no output");
  int e = 0;
  if (o->f) {
    if (fflush(o->f) != 0 && !o->err_no) o->err_no = errno ? errno : EIO;
    if (ferror(o->f) && !o->err_no) o->err_no = EIO;
    fclose(o->f); /* the cookie leaves the descriptor open */
    o->f = NULL;
  }
  e = o->err_no;
  /* fsync: the data must be on disk before the name points at it, or a crash after the rename
   * could leave an empty file under the old name. Devices and pipes cannot be synced. */
  if (!e && o->tmp && fsync(o->fd) != 0) e = errno;
  if (close(o->fd) != 0 && !e) e = errno;
  o->fd = -1;
  if (!e && o->tmp && rename(o->tmp, o->path) != 0) e = errno;
  if (e) {
    gm_err_set(err, GM_ERR_IO, "cannot write '%s': %s", o->path, strerror(e));
    discard(o); /* removes the temporary file: the target is as it was */
    return GM_ERR_IO;
  }
  if (o->tmp) sync_dir(o->path);
  free(o->tmp);
  o->tmp = NULL;
  discard(o);
  return GM_OK;
}

gm_status_t gm_stdout_close(gm_err_t *err) {
  /* A write that failed earlier (the buffer flushed halfway) left only the error flag. */
  int earlier = ferror(stdout), e = 0;
  errno = 0;
  if (fflush(stdout) != 0) e = errno ? errno : EIO;
  if (fclose(stdout) != 0 && !e && !earlier) e = errno ? errno : EIO;
  if (e) return gm_err_set(err, GM_ERR_IO, "cannot write to standard output: %s", strerror(e));
  if (earlier) return gm_err_set(err, GM_ERR_IO, "cannot write to standard output: a write failed");
  return GM_OK;
}
