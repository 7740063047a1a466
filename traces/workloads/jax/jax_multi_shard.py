"""JAX workload 5: several devices' worth of arrays on one device: a data-parallel step written
for 4 replicas (vmap over a leading replica axis) run on a single GPU, so parameters,
gradients and activations exist four times over, plus a reduction across the replica axis."""
import jax
import jax.numpy as jnp

import _jcommon

R = 4


def loss(w, x):
    h = jnp.tanh(x @ w[0])
    h = jnp.tanh(h @ w[1])
    return jnp.mean(h @ w[2])


@jax.jit
def step(ws, xs):
    g = jax.vmap(jax.grad(loss))(ws, xs)
    gm = jax.tree_util.tree_map(lambda t: jnp.mean(t, axis=0, keepdims=True), g)
    return jax.tree_util.tree_map(lambda w, t: w - 1e-2 * t, ws, gm)


def main():
    key = jax.random.PRNGKey(5)
    k1, k2, k3 = jax.random.split(key, 3)
    ws = [jax.random.normal(k1, (R, 2048, 2048)) * 0.02, jax.random.normal(k2, (R, 2048, 2048)) * 0.02,
          jax.random.normal(k3, (R, 2048, 256)) * 0.02]
    for i in range(6):
        key, kx = jax.random.split(key)
        xs = jax.random.normal(kx, (R, 1024 * (1 + i % 3), 2048))
        ws = step(ws, xs)
    jax.block_until_ready(ws)
    _jcommon.finish("jax_multi_shard")


if __name__ == "__main__":
    main()
