/* rp_bigmem.h: zeroed host memory for the replay's large tables (the address numbering and the
 * engines' tables over it, tens of MiB per million events), in 2 MiB pages where the kernel
 * gives them (transparent huge pages on request): fresh 4 KiB pages cost a fault each, which
 * on the machines measured (bench/RESULTS.md) was more than the tables' use. Internal to
 * //replay/engine. */
#ifndef RP_BIGMEM_H
#define RP_BIGMEM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* bytes of zeroed memory, or NULL. Free with rp_bigmem_free(p, bytes). */
void *rp_bigmem_alloc(size_t bytes);
void rp_bigmem_free(void *p, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif /* RP_BIGMEM_H */
