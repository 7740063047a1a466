/* rp_bigmem.c: large zeroed tables in huge pages where possible (see rp_bigmem.h). Below 4 MiB
 * calloc: small tables gain nothing from huge pages. */
#include "replay/engine/rp_bigmem.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)
#define MIN_BIG ((size_t)4 << 20)

/* Mapped sizes are rounded up to a huge page; the mapping starts on one (over-mapped by one
 * huge page and trimmed), so that the kernel can back it with huge pages from the start. */
static size_t rounded(size_t bytes) { return (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1); }

void *rp_bigmem_alloc(size_t bytes) {
  if (bytes < MIN_BIG) return calloc(bytes ? bytes : 1, 1);
  size_t len = rounded(bytes);
  uint8_t *m = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return NULL;
  uintptr_t a = ((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
  size_t head = a - (uintptr_t)m;
  if (head) munmap(m, head);
  if (HUGE_PAGE - head) munmap((uint8_t *)a + len, HUGE_PAGE - head);
#ifdef MADV_HUGEPAGE
  madvise((void *)a, len, MADV_HUGEPAGE);
#endif
  return (void *)a;
}

void rp_bigmem_free(void *p, size_t bytes) {
  if (!p) return;
  if (bytes < MIN_BIG) free(p);
  else munmap(p, rounded(bytes));
}
