/* rec_sites.h: the callsite of each request PyTorch's caching allocator serves (rec_sites.c), for
 * gpurec's default mode, where the requests themselves come from PyTorch's memory history. */
#ifndef REC_SITES_H
#define REC_SITES_H

#include <stdint.h>

#include "recorder/rec_callsite.h"
#include "recorder/rec_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library that reports each request, and the function it reports to (libc10.so's
 * c10::reportMemoryUsageToProfiler(void*, int64_t, size_t, size_t, c10::Device), mangled: a
 * changed signature is a different name, so a torch whose report differs is never hooked). */
#define REC_SITES_OBJECT "libc10_cuda.so"
#define REC_SITES_SYMBOL "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE"

/* Where notes go: the recorder's core, its callsite table and clock (the adapter's). Until this
 * is called, and when core or cs is NULL, the hook records nothing and only passes calls on. */
void rec_sites_attach(rec_core_t *core, rec_callsites_t *cs, uint64_t (*now_ns)(void *ctx));

/* Redirect object's calls to symbol (the two names above, or test stand-ins) to the hook.
 * Returns the number of GOT slots changed (0: already hooked), -1 with why when it cannot be
 * hooked (not loaded, no such call), -2 when nothing would be recorded (no core, or callsites
 * off). */
int rec_sites_hook(const char *object, const char *symbol, char *why, size_t nwhy);

/* The slots back at the original (a measurement's control, in the same process): returns the
 * slots changed, -1 with why when it was never hooked. rec_sites_hook hooks again. */
int rec_sites_unhook(const char *object, const char *symbol, char *why, size_t nwhy);

/* Notes pushed so far (tests). */
uint64_t rec_sites_notes(void);

#ifdef __cplusplus
}
#endif
#endif /* REC_SITES_H */
