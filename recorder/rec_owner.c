/* rec_owner.c: which library made a driver call (issue 17: memory outside the framework).
 *
 * NCCL maps its buffers through the VMM API, cuBLAS takes workspaces with cudaMalloc, PyTorch's
 * expandable segments and JAX's platform allocator map pages: the driver call alone does not say
 * whose memory it is. The return addresses on the calling thread do. Walking outwards from this
 * function, the frames are this library's, CUPTI's, the driver's (and the CUDA runtime's when
 * the program used it); the first frame in any other object is the caller: its file name,
 * "[libnccl.so.2]", is the owner. backtrace() (libgcc's unwinder over .eh_frame) and dladdr()
 * cost microseconds: the recorder asks only for the rare calls (synchronous allocations, VMM),
 * never for the stream-ordered requests of a framework. */
#include <dlfcn.h>
#include <execinfo.h>
#include <string.h>

#include "recorder/rec_callsite.h"

#define MAX_FRAMES 48

/* CUDA's own libraries, the C library (pthread_once, a thread's start) and the sanitizers'
 * runtimes (they intercept backtrace()): never an owner */
static const char *const cuda_libs[] = {"libcuda.", "libcupti.", "libcudart.", "libnvidia-",
                                        "libgpumem_inject.", "libc.so.", "libpthread.",
                                        "ld-linux", "libasan.", "libubsan.", "libtsan.",
                                        "liblsan.", NULL};
static const char *const sanitizers[] = {"libasan.", "libubsan.", "libtsan.", "liblsan.", NULL};

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

static int skipped(const char *name, const char *const *skip) {
  for (; *skip; skip++)
    if (strncmp(name, *skip, strlen(*skip)) == 0) return 1;
  return 0;
}

void rec_owner_prime(void) {
  void *f[2];
  backtrace(f, 2);
}

size_t rec_owner_name(const char *const *skip, const void *self, char *out, size_t n) {
  if (n < 4) return 0;
  out[0] = '\0';
  if (!skip) skip = cuda_libs;
  void *frames[MAX_FRAMES];
  int k = backtrace(frames, MAX_FRAMES);
  Dl_info me;
  const void *self_base = self && dladdr(self, &me) ? me.dli_fbase : NULL;
  for (int i = 0; i < k; i++) {
    Dl_info in;
    /* a return address points after the call: step back one byte to stay in the caller */
    if (!dladdr((const char *)frames[i] - 1, &in) || !in.dli_fname) continue;
    if (self_base && in.dli_fbase == self_base) continue;
    const char *name = base_name(in.dli_fname);
    if (!*name) name = "main"; /* the executable, when the loader has no name for it */
    if (skipped(name, skip) || skipped(name, sanitizers)) continue;
    size_t len = strlen(name);
    if (len + 3 > n) len = n - 3;
    out[0] = '[';
    memcpy(out + 1, name, len);
    out[len + 1] = ']';
    out[len + 2] = '\0';
    return len + 2;
  }
  return 0;
}
