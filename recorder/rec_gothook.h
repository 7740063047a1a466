/* rec_gothook.h: redirect one loaded library's calls to a function of another library, by
 * rewriting the caller's GOT slot (rec_gothook.c). CUDA-free, tested in CI.
 *
 * Why: PyTorch's caching allocator serves most tensors from its cache, with no driver call for
 * CUPTI to see, but it reports every allocation and free, on the allocating thread and with the
 * block's address, to c10::reportMemoryUsageToProfiler (libc10.so), which libc10_cuda.so calls
 * through its GOT. Redirecting that one slot gives the recorder a C-ABI hook per request
 * (rec_sites.c) without touching the allocator or its settings. */
#ifndef REC_GOTHOOK_H
#define REC_GOTHOOK_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* In the loaded object whose file name (after the last '/') starts with `object` (e.g.
 * "libc10_cuda.so"), point every GOT slot that binds `sym` at repl. *orig gets what the calls
 * reached before (the slot's resolved target, or the definition the object's own scope sees when
 * the slot is still lazy); a slot already pointing at repl is left alone and not counted.
 * Returns the number of slots changed (0: nothing to change), -1 with why filled when the object
 * is not loaded, does not import sym, or a slot cannot be written. */
int rec_got_hook(const char *object, const char *sym, void *repl, void **orig, char *why,
                 size_t nwhy);

#ifdef __cplusplus
}
#endif
#endif /* REC_GOTHOOK_H */
