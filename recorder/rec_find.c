/* rec_find.c: where libcupti is, found at run time without CUDA headers.
 *
 * The recorder never links CUPTI: a build made against one toolkit must run with whatever
 * CUPTI the user's machine has, and the launcher must start (and say so) where there is none.
 * Search order, first hit wins:
 *   1. a libcupti already loaded in the process (torch loads its own; two copies conflict);
 *   2. $GPUMEM_CUPTI (a file or a directory): when set, nothing else is tried;
 *   3. $CUDA_HOME / $CUDA_PATH: lib64, extras/CUPTI/lib64, targets/x86_64-linux/lib, lib;
 *   4. /usr/local/cuda and /usr/local/cuda-* (newest first);
 *   5. the nvidia-cuda-cupti wheel (nvidia/cuda_cupti/lib for cu12, nvidia/cu13/lib for cu13)
 *      under $VIRTUAL_ENV, /opt/x/.venv, /usr/local, /usr, the $GPUMEM_SITE_PACKAGES entries
 *      (set by the pip package's launcher to its Python's site-packages, so a venv's CUPTI is
 *      found without activating the venv) and the $PYTHONPATH entries;
 *   6. the dynamic loader's own search (LD_LIBRARY_PATH, ldconfig). */
#include <dlfcn.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recorder/rec_core.h"

typedef struct found {
  void *lib;
  char *path;
  size_t n;
} found_t;

static int try_lib(found_t *f, const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) return 0;
  if (!dlsym(h, "cuptiActivityEnable")) {
    dlclose(h);
    return 0;
  }
  f->lib = h;
  snprintf(f->path, f->n, "%s", path);
  return 1;
}

static int try_dir(found_t *f, const char *dir) {
  static const char *const names[] = {"libcupti.so", "libcupti.so.13", "libcupti.so.12", NULL};
  char p[1200];
  for (const char *const *n = names; *n; n++) {
    snprintf(p, sizeof p, "%s/%s", dir, *n);
    if (access(p, R_OK) == 0 && try_lib(f, p)) return 1;
  }
  return 0;
}

static int try_glob(found_t *f, const char *pattern) {
  glob_t gl;
  int ok = 0;
  if (glob(pattern, 0, NULL, &gl) == 0) {
    for (size_t i = gl.gl_pathc; i-- > 0 && !ok;) ok = try_lib(f, gl.gl_pathv[i]); /* newest */
    globfree(&gl);
  }
  return ok;
}

static int search(found_t *f) {
  static const char *const loaded[] = {"libcupti.so.13", "libcupti.so", "libcupti.so.12", NULL};
  for (const char *const *n = loaded; *n; n++) {
    void *h = dlopen(*n, RTLD_NOW | RTLD_NOLOAD);
    if (h) {
      f->lib = h;
      snprintf(f->path, f->n, "%s (already loaded)", *n);
      return 1;
    }
  }
  const char *env = getenv(REC_ENV_CUPTI);
  if (env && *env) return try_lib(f, env) || try_dir(f, env);
  char p[1200];
  const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH")};
  for (int h = 0; h < 2; h++) {
    if (!homes[h] || !*homes[h]) continue;
    static const char *const sub[] = {"lib64", "extras/CUPTI/lib64", "targets/x86_64-linux/lib",
                                      "lib", NULL};
    for (const char *const *s = sub; *s; s++) {
      snprintf(p, sizeof p, "%s/%s", homes[h], *s);
      if (try_dir(f, p)) return 1;
    }
  }
  static const char *const pats[] = {"/usr/local/cuda/lib64/libcupti.so*",
                                     "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so*",
                                     "/usr/local/cuda-*/targets/x86_64-linux/lib/libcupti.so*",
                                     "/usr/local/cuda-*/extras/CUPTI/lib64/libcupti.so*",
                                     "/usr/local/cuda-*/lib64/libcupti.so*", NULL};
  for (const char *const *s = pats; *s; s++)
    if (try_glob(f, *s)) return 1;
  static const char *const wheel[] = {"nvidia/cuda_cupti/lib/libcupti.so*",
                                      "nvidia/cu13/lib/libcupti.so*", NULL};
  const char *roots[] = {getenv("VIRTUAL_ENV"), "/opt/*/.venv", "/usr/local", "/usr"};
  for (int r = 0; r < 4; r++) {
    if (!roots[r] || !*roots[r]) continue;
    for (const char *const *w = wheel; *w; w++) {
      snprintf(p, sizeof p, "%s/lib/python3*/site-packages/%s", roots[r], *w);
      if (try_glob(f, p)) return 1;
      snprintf(p, sizeof p, "%s/lib/python3*/dist-packages/%s", roots[r], *w);
      if (try_glob(f, p)) return 1;
    }
  }
  static const char *const lists[] = {"GPUMEM_SITE_PACKAGES", "PYTHONPATH"};
  for (int l = 0; l < 2; l++) {
    const char *pp = getenv(lists[l]);
    if (!pp || !*pp) continue;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", pp);
    for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save))
      for (const char *const *w = wheel; *w; w++) {
        snprintf(p, sizeof p, "%s/%s", d, *w);
        if (try_glob(f, p)) return 1;
      }
  }
  return try_lib(f, "libcupti.so") || try_lib(f, "libcupti.so.13") ||
         try_lib(f, "libcupti.so.12");
}

void *rec_cupti_open(char *path, size_t n) {
  found_t f = {NULL, path, n};
  if (n) path[0] = '\0';
  return search(&f) ? f.lib : NULL;
}

int rec_cupti_version(void *lib, uint32_t *version) {
  int (*get)(uint32_t *) = (int (*)(uint32_t *))dlsym(lib, "cuptiGetVersion");
  return get && get(version) == 0; /* CUPTI_SUCCESS */
}
