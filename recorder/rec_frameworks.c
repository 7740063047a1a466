/* rec_frameworks.c: which ML frameworks a recorded process runs, and their versions.
 *
 * A trace must say whose allocator it holds (JAX's requests are not PyTorch's), so the
 * recorder looks at the shared objects the process has loaded when the trace's header is
 * written (after the first CUDA context exists: by then each framework that allocates has
 * loaded its CUDA library). Each framework is recognised by a library it always loads, and its
 * version comes from the pip metadata beside it: the `<dist>-<version>.dist-info` folder in
 * the same site-packages. The result goes into the header as `framework.<name>` = version
 * ("unknown" when there is no metadata), the format's contract (formats/SPEC.md §3).
 *
 * CUDA-free and allocation-light: a walk over the loaded objects (dl_iterate_phdr) and one
 * directory listing per framework found. */
#include <dirent.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "recorder/rec_core.h"

typedef struct fw_rule {
  const char *name;          /* gmt_framework_name: the header key's suffix */
  const char *path_part;     /* a loaded object whose path holds this is the framework's */
  const char *const *dists;  /* dist-info name prefixes, in order of preference */
} fw_rule_t;

static const char *const torch_dists[] = {"torch-", NULL};
static const char *const jax_dists[] = {"jax-", "jaxlib-", NULL};
static const char *const tf_dists[] = {"tensorflow-", "tensorflow_cpu-", "tf_nightly-", NULL};
static const char *const cupy_dists[] = {"cupy-", "cupy_cuda", NULL};

static const fw_rule_t rules[] = {
    {"pytorch", "/torch/lib/libtorch_cuda", torch_dists},
    {"jax", "/jaxlib/", jax_dists},
    {"jax", "/jax_plugins/", jax_dists},
    {"tensorflow", "/libtensorflow_framework", tf_dists},
    {"cupy", "/cupy_backends/", cupy_dists},
    {"cupy", "/cupy/", cupy_dists},
};
#define N_RULES (sizeof rules / sizeof rules[0])

typedef struct walk {
  char path[N_RULES][1024]; /* first matching object per rule */
} walk_t;

static int visit(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  walk_t *w = data;
  const char *p = info->dlpi_name;
  if (!p || !*p) return 0;
  for (size_t i = 0; i < N_RULES; i++)
    if (!w->path[i][0] && strstr(p, rules[i].path_part))
      snprintf(w->path[i], sizeof w->path[i], "%s", p);
  return 0;
}

/* "<dist><version>.dist-info" in the site-packages folder that holds `lib`. */
static int find_version(const char *lib, const char *const *dists, char *out, size_t n) {
  char dir[1024];
  const char *sp = strstr(lib, "/site-packages/");
  if (!sp) sp = strstr(lib, "/dist-packages/");
  if (!sp) return 0;
  size_t len = (size_t)(strchr(sp + 1, '/') - lib);
  if (len >= sizeof dir) return 0;
  memcpy(dir, lib, len);
  dir[len] = '\0';
  for (const char *const *d = dists; *d; d++) {
    DIR *dp = opendir(dir);
    if (!dp) return 0;
    struct dirent *e;
    int found = 0;
    size_t pl = strlen(*d);
    while (!found && (e = readdir(dp)) != NULL) {
      const char *nm = e->d_name;
      size_t l = strlen(nm);
      if (strncmp(nm, *d, pl) != 0 || l < pl + 10 || strcmp(nm + l - 10, ".dist-info") != 0)
        continue;
      const char *v = strchr(nm + pl - 1, '-'); /* the version follows the dist name's '-' */
      if (!v || (size_t)(v - nm) >= l - 10) continue;
      v++;
      size_t vl = (size_t)(nm + l - 10 - v);
      if (vl == 0 || vl >= n) continue;
      memcpy(out, v, vl);
      out[vl] = '\0';
      found = 1;
    }
    closedir(dp);
    if (found) return 1;
  }
  return 0;
}

int rec_frameworks_fill(gmt_header_t *h) {
  walk_t w;
  memset(&w, 0, sizeof w);
  dl_iterate_phdr(visit, &w);
  int found = 0;
  for (size_t i = 0; i < N_RULES; i++) {
    if (!w.path[i][0]) continue;
    char key[64], ver[128];
    snprintf(key, sizeof key, "framework.%s", rules[i].name);
    if (gmt_header_kv_get(h, key)) continue; /* a second rule for the same framework */
    if (!find_version(w.path[i], rules[i].dists, ver, sizeof ver)) snprintf(ver, sizeof ver, "unknown");
    gm_err_t err;
    gm_err_clear(&err);
    if (gmt_header_kv_set(h, key, ver, &err) == GM_OK) found++;
  }
  return found;
}
