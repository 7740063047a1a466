/* gpurec_env.h: the job's environment, set by the launcher (gpurec_env.c) before it starts
 * the command. */
#ifndef GPUREC_ENV_H
#define GPUREC_ENV_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* setenv, or "gpurec: error: cannot set K: ..." on stderr and -1. */
int gpurec_set_env(const char *k, const char *v);
/* The user's own PYTORCH_CUDA_ALLOC_CONF (and PYTORCH_ALLOC_CONF) read by the rules gpureplay's
 * --policy uses: a typo is a warning. Returns how many warnings it gave. */
int gpurec_check_alloc_conf(void);
/* What --mode (auto, requests, native, torch) switches in the frameworks' allocators, said on
 * stderr unless quiet. 0, or -1 (said). */
int gpurec_set_mode_env(const char *mode, const char *stacks, const char *callsites, int quiet);
/* libgpumem_inject.so's path into out: 1 if it is there to read, else 0 (out: where it was
 * looked for first, for the warning). */
int gpurec_find_inject(char *out, size_t n);
/* p made absolute against the working directory (malloc'd; NULL: out of memory). */
char *gpurec_absolute(const char *p);

#ifdef __cplusplus
}
#endif

#endif /* GPUREC_ENV_H */
