"""JAX workload 1: MLP training under jit with shapes that change (four batch sizes, each
compiled once and stepped several times); parameters and Adam state live across steps."""
import jax
import jax.numpy as jnp

import _jcommon


def init(key, sizes):
    ps = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        key, k = jax.random.split(key)
        ps.append((jax.random.normal(k, (a, b), jnp.float32) / a ** 0.5, jnp.zeros((b,), jnp.float32)))
    return ps


def loss(ps, x, y):
    h = x
    for w, b in ps[:-1]:
        h = jax.nn.gelu(h @ w + b)
    w, b = ps[-1]
    return jnp.mean((h @ w + b - y) ** 2)


@jax.jit
def step(ps, m, v, x, y):
    g = jax.grad(loss)(ps, x, y)
    m = jax.tree_util.tree_map(lambda a, b: 0.9 * a + 0.1 * b, m, g)
    v = jax.tree_util.tree_map(lambda a, b: 0.999 * a + 0.001 * b * b, v, g)
    ps = jax.tree_util.tree_map(lambda p, a, b: p - 1e-3 * a / (jnp.sqrt(b) + 1e-8), ps, m, v)
    return ps, m, v


def main():
    key = jax.random.PRNGKey(0)
    sizes = [1024, 4096, 4096, 4096, 1024]
    ps = init(key, sizes)
    m = jax.tree_util.tree_map(jnp.zeros_like, ps)
    v = jax.tree_util.tree_map(jnp.zeros_like, ps)
    for batch in (256, 1024, 4096, 2048):
        for i in range(4):
            key, kx, ky = jax.random.split(key, 3)
            x = jax.random.normal(kx, (batch, sizes[0]), jnp.float32)
            y = jax.random.normal(ky, (batch, sizes[-1]), jnp.float32)
            ps, m, v = step(ps, m, v, x, y)
    jax.block_until_ready(ps)
    _jcommon.finish("jax_train_shapes")


if __name__ == "__main__":
    main()
