/* rp_conf.h: the conf-string parser shared by the bfc, prealloc, tf, direct and async policies.
 *
 * A conf is the text after "name:" in a policy spec: comma-separated items, each "key",
 * "key=value" or "key:value" (both separators, so PyTorch-style "key:value" habits work).
 * Each policy declares ONE table of the keys it knows; an unknown key or a bad value is
 * GM_ERR_INVAL with a message that names the policy and the key. Nothing here prints. */
#ifndef RP_CONF_H
#define RP_CONF_H

#include <stddef.h>
#include <stdint.h>

#include "base/gm_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An amount of device memory given either as bytes ("12GiB") or as a fraction of the
 * device's total memory ("0.75"). */
typedef struct rp_amount {
  int set;         /* 0: not given */
  int is_fraction; /* 1: fraction of total_memory */
  double fraction;
  uint64_t bytes;
} rp_amount_t;

typedef enum rp_conf_kind {
  RP_CONF_FLAG,     /* int: "key" alone sets 1; "key=true|false|1|0" also accepted */
  RP_CONF_BOOL,     /* int: "key=true|false|1|0" (value required) */
  RP_CONF_SIZE,     /* uint64_t via gm_parse_size */
  RP_CONF_FRACTION, /* double in (0, 1] */
  RP_CONF_AMOUNT,   /* rp_amount_t: size or fraction */
  RP_CONF_STRING    /* char[RP_CONF_STR_MAX]: the value verbatim (trimmed), for a policy that
                       checks it itself (a framework's own words, compared as it compares them) */
} rp_conf_kind_t;

#define RP_CONF_STR_MAX 64

typedef struct rp_conf_key {
  const char *name; /* NULL ends the table */
  rp_conf_kind_t kind;
  size_t offset; /* offsetof(config, field) */
} rp_conf_key_t;

/* Parse conf into cfg using keys. `bare_key` (may be NULL) names the key that an item
 * without a separator takes when it starts with a digit or '.', e.g. "prealloc:0.5".
 * Errors: GM_ERR_INVAL "<policy>: unknown key 'x' (known: a, b)" or
 * "<policy>: bad value for 'key': <why>". */
gm_status_t rp_conf_parse(const char *policy, const char *conf, const rp_conf_key_t *keys,
                          const char *bare_key, void *cfg, gm_err_t *err);

/* "0.75" -> fraction (a plain number <= 1); "12GiB" or "1073741824" -> bytes. Zero is
 * rejected: an allocator with no memory is a configuration mistake. */
gm_status_t rp_amount_parse(const char *s, rp_amount_t *out, gm_err_t *err);

/* The amount in bytes on a device of `total` bytes. */
uint64_t rp_amount_bytes(const rp_amount_t *a, uint64_t total);

#ifdef __cplusplus
}
#endif
#endif /* RP_CONF_H */
