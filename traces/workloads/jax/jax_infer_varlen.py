"""JAX workload 2: variable-length inference: a small attention encoder applied to batches of
random sequence lengths (seeded), padded to multiples of 128 so jit compiles a few shapes;
each batch's outputs are pulled to the host and dropped."""
import random

import jax
import jax.numpy as jnp
import numpy as np

import _jcommon

D, H, L, V = 512, 8, 4, 8192


def init(key):
    ks = jax.random.split(key, 4 * L + 2)
    p = {"emb": jax.random.normal(ks[0], (V, D)) * 0.02, "out": jax.random.normal(ks[1], (D, V)) * 0.02, "layers": []}
    for i in range(L):
        a, b, c, d = ks[2 + 4 * i:6 + 4 * i]
        p["layers"].append({"qkv": jax.random.normal(a, (D, 3 * D)) * 0.02, "o": jax.random.normal(b, (D, D)) * 0.02,
                            "w1": jax.random.normal(c, (D, 4 * D)) * 0.02, "w2": jax.random.normal(d, (4 * D, D)) * 0.02})
    return p


@jax.jit
def forward(p, tok):
    x = p["emb"][tok]
    bsz, s, _ = x.shape
    for l in p["layers"]:
        q, k, v = jnp.split(x @ l["qkv"], 3, axis=-1)
        q = q.reshape(bsz, s, H, D // H)
        k = k.reshape(bsz, s, H, D // H)
        v = v.reshape(bsz, s, H, D // H)
        a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / (D // H) ** 0.5, axis=-1)
        x = x + jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(bsz, s, D) @ l["o"]
        x = x + jax.nn.gelu(x @ l["w1"]) @ l["w2"]
    return jnp.argmax(x @ p["out"], axis=-1)


def main():
    p = init(jax.random.PRNGKey(2))
    rng = random.Random(2)
    nrng = np.random.default_rng(2)
    for _ in range(8):
        seq = -(-rng.randint(64, 1024) // 128) * 128
        batch = rng.choice([2, 4, 8])
        tok = jnp.asarray(nrng.integers(0, V, (batch, seq)), dtype=jnp.int32)
        out = np.asarray(forward(p, tok))
        del out, tok
    _jcommon.finish("jax_infer_varlen")


if __name__ == "__main__":
    main()
