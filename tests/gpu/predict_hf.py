#!/usr/bin/env python3
"""predict_hf.py: jobs of gpurec predict's corpus as users run them (issue 26).

  python3 predict_hf.py JOB VALUE OUTDIR [--steps 3]

The value stands twice in the command line (a positional argument and the output folder,
`python3 predict_hf.py hf_batch 8 out/rb8`), as users write it; gpurec predict masks both.
JOB:
  hf_batch  HuggingFace GPT2LMHeadModel from a config (4 x 512, 8 heads, vocabulary 16384, random
            weights), AdamW, fp32, sequence 256, batch VALUE
  hf_seq    the same at batch 4, sequence length VALUE (the library's default attention)
  resnet    torchvision ResNet-50 (100 classes, 128 x 128 images), SGD momentum, batch VALUE
  jax_mlp   a JAX MLP (4 x 2048, Adam-like update in jit) at batch VALUE; its result is
            memory_stats() (peak_pool_bytes under growth)
--cap-bytes B (the torch jobs): the allocator may hold at most B
(torch.cuda.set_per_process_memory_fraction): a largest-fit run; running out of memory is then
its answer ("oom": true in the result, exit 0), not a failure.
Prints one line `GPUMEM_RESULT {json}` (max_memory_reserved/allocated, the value, the allocator
setting in force, the device) and writes it to OUTDIR/result.json."""
import argparse
import json
import os


def torch_job(a):
    import torch
    dev = torch.device("cuda")
    if a.cap_bytes:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, a.cap_bytes / total), 0)
    try:
        oom = torch_steps(a, torch, dev)
    except torch.cuda.OutOfMemoryError:
        if not a.cap_bytes:
            raise
        oom = True
    torch.cuda.synchronize()
    return {"alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
            "max_memory_reserved": torch.cuda.max_memory_reserved(),
            "max_memory_allocated": torch.cuda.max_memory_allocated(),
            "num_alloc_retries": torch.cuda.memory_stats().get("num_alloc_retries", 0), "oom": oom,
            "cap_bytes": a.cap_bytes, "device": torch.cuda.get_device_name(0), "torch": torch.__version__}


def torch_steps(a, torch, dev):
    import torch.nn.functional as F
    torch.manual_seed(0)
    if a.job.startswith("hf_"):
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(n_layer=4, n_embd=512, n_head=8, vocab_size=16384, n_positions=2048)
        model = GPT2LMHeadModel(cfg).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        b, t = (a.value, 256) if a.job == "hf_batch" else (4, a.value)
        for _ in range(a.steps):
            x = torch.randint(0, 16384, (b, t), device=dev)
            loss = model(input_ids=x, labels=x).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    else:
        import torchvision
        model = torchvision.models.resnet50(num_classes=100).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        for _ in range(a.steps):
            x = torch.randn(a.value, 3, 128, 128, device=dev)
            y = torch.randint(0, 100, (a.value,), device=dev)
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    return False


def jax_job(a):
    import jax
    import jax.numpy as jnp
    k = jax.random.PRNGKey(0)
    ws = [jax.random.normal(k, (2048, 2048)) * 0.01 for _ in range(4)]

    @jax.jit
    def step(ws, x):
        def loss(ws):
            h = x
            for w in ws:
                h = jnp.tanh(h @ w)
            return jnp.mean(h * h)
        g = jax.grad(loss)(ws)
        return [w - 1e-3 * gw for w, gw in zip(ws, g)]

    for i in range(a.steps):
        x = jax.random.normal(jax.random.PRNGKey(i + 1), (a.value, 2048))
        ws = step(ws, x)
    jax.block_until_ready(ws)
    st = jax.devices()[0].memory_stats() or {}
    return {"alloc_conf": " ".join("%s=%s" % (e, os.environ[e]) for e in sorted(os.environ) if e.startswith("XLA_")),
            "peak_pool_bytes": st.get("peak_pool_bytes"), "peak_bytes_in_use": st.get("peak_bytes_in_use"),
            "max_memory_reserved": st.get("peak_pool_bytes"), "oom": False,
            "device": str(jax.devices()[0].device_kind), "jax": jax.__version__}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("job", choices=["hf_batch", "hf_seq", "resnet", "jax_mlp"])
    p.add_argument("value", type=int)
    p.add_argument("outdir")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--cap-bytes", type=int, default=0)
    a = p.parse_args()
    r = jax_job(a) if a.job == "jax_mlp" else torch_job(a)
    r.update({"job": a.job, "value": a.value, "steps": a.steps})
    os.makedirs(a.outdir, exist_ok=True)
    with open(os.path.join(a.outdir, "result.json"), "w") as f:
        json.dump(r, f)
    print("GPUMEM_RESULT " + json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
