"""JAX workload 4: an eager job whose live memory steps up to ~2.3 GiB (arrays of 256 MiB
added one by one, with temporaries), run under memory fractions tight enough to make the BFC
fail: the job catches the first RESOURCE_EXHAUSTED, reports it and stops. Eager ops keep the
request sequence independent of the memory limit (no jit program to recompile)."""
import jax
import jax.numpy as jnp

import _jcommon


def main():
    live = []
    oom = None
    try:
        for i in range(9):
            a = jnp.full((64 << 20,), float(i), jnp.float32)  # 256 MiB
            b = a * 2.0 + 1.0                                  # a 256 MiB temporary
            live.append(b)
            del a
            jax.block_until_ready(live[-1])
        total = float(sum(x[0] for x in live))
    except Exception as e:
        if not _jcommon.is_oom(e):
            raise
        oom = {"at_array": len(live), "message": str(e).splitlines()[0][:300]}
        total = None
    _jcommon.finish("jax_eager_grow", oom=oom, extra={"checksum": total})


if __name__ == "__main__":
    main()
