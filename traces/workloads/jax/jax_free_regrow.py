"""JAX workload 3: a job that frees a large part of its memory and regrows with other sizes
(eager ops, no jit): many 8-64 MiB arrays, then every other one deleted, then arrays of sizes
that do not fit the holes, then all but a few deleted and a second wave of large arrays."""
import jax
import jax.numpy as jnp

import _jcommon


def main():
    key = jax.random.PRNGKey(3)
    arrs = []
    for i in range(24):
        n = (8 + (i * 7) % 57) << 18  # 8..64 MiB of float32
        arrs.append(jnp.ones((n,), jnp.float32) * i)
    jax.block_until_ready(arrs)
    arrs = [a for i, a in enumerate(arrs) if i % 2 == 0]
    big = [jnp.zeros((80 << 18,), jnp.float32) + i for i in range(6)]  # 80 MiB each
    jax.block_until_ready(big)
    keep = arrs[:2]
    del arrs
    big = big[:1]
    wave = []
    for i in range(10):
        k, key = jax.random.split(key)
        wave.append(jax.random.normal(k, ((24 + 11 * i) << 18,), jnp.float32))
    jax.block_until_ready(wave)
    s = sum(float(w.sum()) for w in wave) + float(keep[0].sum()) + float(big[0].sum())
    _jcommon.finish("jax_free_regrow", extra={"checksum": s})


if __name__ == "__main__":
    main()
