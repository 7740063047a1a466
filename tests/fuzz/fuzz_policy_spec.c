/* fuzz_policy_spec.c: libFuzzer target over policy specs (gpureplay --policy=SPEC): the
 * registry's "name[:conf]" split, every policy's conf parser (PYTORCH_CUDA_ALLOC_CONF with its
 * tokenizer, the key=value tables of bfc/prealloc/jax/direct/async) and, when a spec is
 * accepted, a short replay on the policies' fake driver.
 * Input: the spec up to the first NUL; the bytes after it drive the replay (alloc sizes and
 * frees). Oracles (abort = a finding): a spec that parses has a canonical spec that parses
 * again; the policy's invariant check holds after every operation; the fake driver is never
 * misused and gets every byte back at release_all; requests no device has are OOMs.
 * Built and run by run_fuzz.sh (clang -fsanitize=fuzzer,address,undefined). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "replay/policies/rp_policies.h"
#include "replay/policies/testing/fake_driver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void replay(const rp_policy_ops_t *ops, rp_policy_t *p, rp_fake_driver_t *f, const uint8_t *d, size_t n) {
  uint64_t live[16] = {0};
  int nlive = 0;
  gm_err_t err;
  for (size_t i = 0; i + 2 < n && i < 3 * 64; i += 3) {
    uint8_t op = d[i];
    uint64_t size = ((uint64_t)d[i + 1] << 8 | d[i + 2]) << (op & 31); /* 0 .. 2^47 */
    if (op & 0x80 && nlive) {
      int k = d[i + 1] % nlive;
      if (ops->free(p, live[k], &err) != GM_OK) abort();
      live[k] = live[--nlive];
    } else if (op & 0x40) {
      if (ops->empty_cache(p, &err) < 0) abort();
    } else {
      uint64_t addr = 0;
      if (op == 0x3f) size = UINT64_MAX - d[i + 1]; /* never served */
      gm_status_t st = ops->alloc(p, size, op & 3, &addr, &err);
      if (st == GM_OK && size > RP_REQUEST_MAX) abort();
      if (st == GM_OK && nlive < 16) live[nlive++] = addr;
      else if (st == GM_OK && ops->free(p, addr, &err) != GM_OK) abort();
      else if (st != GM_OK && st != GM_ERR_NOMEM) abort();
    }
    if (ops->check(p, &err) != GM_OK) abort();
    if (f->errors) abort();
  }
  if (ops->release_all(p, &err) != GM_OK) abort();
  if (f->used != 0 || f->errors) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t sl = 0;
  while (sl < size && data[sl]) sl++;
  if (sl > 4096) return 0;
  char spec[4097];
  memcpy(spec, data, sl);
  spec[sl] = '\0';
  rp_fake_driver_t f;
  rp_fake_driver_init(&f, 256ull << 20, 2ull << 20, 1);
  const rp_policy_ops_t *ops = NULL;
  rp_policy_t *p = NULL;
  gm_err_t err;
  if (rp_policy_create(spec, &f.drv, &ops, &p, &err) == GM_OK) {
    /* the canonical spec the results carry must itself be a valid spec */
    const char *canon = ops->spec(p);
    rp_fake_driver_t f2;
    rp_fake_driver_init(&f2, 256ull << 20, 2ull << 20, 1);
    const rp_policy_ops_t *o2 = NULL;
    rp_policy_t *p2 = NULL;
    if (rp_policy_create(canon, &f2.drv, &o2, &p2, &err) != GM_OK) abort();
    o2->destroy(p2);
    rp_fake_driver_fini(&f2);
    replay(ops, p, &f, data + sl + (sl < size), size - sl - (sl < size));
    ops->destroy(p);
  } else if (err.msg[0] == '\0' || strlen(err.msg) >= sizeof err.msg) {
    abort(); /* a refusal always says why */
  }
  rp_fake_driver_fini(&f);
  return 0;
}
