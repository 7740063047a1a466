#!/usr/bin/env python3
"""advice_jobs.py: PyTorch jobs of issue 25's advice check (tests/gpu/advice_check.sh), each short
(seconds on an H200) but a real job: random weights and random data, nothing downloaded.

  python3 advice_jobs.py JOB            run it on cuda:0; prints `GPUMEM_RESULT {json}`
  python3 advice_jobs.py fragment --csv OUT.csv
                                        (no torch, no GPU) write the fragment job's allocation
                                        requests as a gpumem trace in CSV form (formats/SPEC.md
                                        section 8) for `gpurec import` and the tuner on the CPU
JOB:
  hf_gpt2   HuggingFace transformers GPT2LMHeadModel from a config (6 layers x 512, 8 heads,
            vocabulary 16384), AdamW, fp32, batch 16 x 256 tokens, 3 steps
  nanogpt   a nanoGPT-style training loop written here: a 4-layer GPT (d=384, 6 heads, block 256,
            vocabulary 8192, weight tying), AdamW with decayed and undecayed groups, bf16 autocast,
            cosine learning rate with warmup, gradient accumulation 2, batches from a random
            token array in host memory (pinned, non_blocking), an evaluation of train and val
            loss every 10 iterations (model.eval(), no_grad) and a checkpoint (torch.save of model
            and optimizer) after each evaluation; 30 iterations
  resnet50  torchvision ResNet-50 (100 classes), SGD with momentum, batch 32 of 3 x 160 x 160,
            4 training steps and one evaluation batch
  fragment  a serving-style pattern: per request a scratch buffer of 256 or 512 MiB (two length
            buckets) and, while it is live, a session buffer of 2-30 MiB that outlives it until the
            next request's session is made; 60 requests. Every tensor comes from torch.empty (the
            plan below, the same in the CSV), filled and copied in place (no other allocation).
            On the CPU the tuner advises max_split_size_mb for it (the default pins the large
            blocks with the small sessions carved from them)
The result line: max_memory_reserved / max_memory_allocated, the allocator setting in force, the
device and torch's version."""
import json
import os
import random
import sys
import time

MIB = 1 << 20


# ---- fragment: the plan (no torch here, so the CPU can write the same requests) ----------------

def fragment_plan(seed=48, requests=60):
    """[("alloc", id, nbytes) | ("free", id)] in the order the job makes them."""
    rng = random.Random(seed)
    ev, kept, nid = [], [], 0
    for _ in range(requests):
        nid += 1
        scratch = nid
        ev.append(("alloc", scratch, rng.choice((256, 512)) * MIB))
        nid += 1
        ev.append(("alloc", nid, rng.randint(2, 30) * MIB))  # the session, made while scratch lives
        ev.append(("free", scratch))
        kept.append(nid)
        if len(kept) > 1:
            ev.append(("free", kept.pop(rng.randrange(len(kept)))))
    return ev


def fragment_csv(path, seed=48, requests=60):
    """The plan as a requests-mode trace in CSV text form: one stream, addresses from a bump pointer
    (the replay places segments itself; the addresses only pair frees with allocations)."""
    rows, live, addr, t = [], {}, 0x300000000, 1000
    for i, e in enumerate(fragment_plan(seed, requests)):
        t += 1000
        if e[0] == "alloc":
            live[e[1]] = (addr, e[2])
            rows.append("%d,alloc,0,7,0x%x,%d,device,0x3,%d" % (t, addr, e[2], i + 1))
            addr += e[2]
        else:
            a, n = live.pop(e[1])
            rows.append("%d,free,0,7,0x%x,%d,device,0x3,%d" % (t, a, n, i + 1))
    head = ["# gpumem trace, text form 1", "#capture_mode=requests", "#pid=1",
            "#start_time_ns=1795000000000000000", "#gpu_total_mem=150109880320",
            "#command_line=python3 advice_jobs.py fragment",
            "ts_ns,kind,device,stream,addr,size,mem_kind,flags,corr_id"]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(head + rows) + "\n")
    os.replace(tmp, path)


# ---- the jobs on the GPU ---------------------------------------------------------------------

def job_fragment(torch, dev):
    live = {}
    for e in fragment_plan():
        if e[0] == "alloc":
            t = torch.empty(e[2], dtype=torch.uint8, device=dev)
            if e[1] % 2:  # a scratch buffer (odd ids): filled in place, no allocation
                t.view(torch.float32).uniform_()
            else:  # a session (even ids): the head of its request's scratch, copied in place
                t.copy_(live[e[1] - 1][:e[2]])
            live[e[1]] = t
        else:
            del live[e[1]]


def job_hf_gpt2(torch, dev):
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=6, n_embd=512, n_head=8, vocab_size=16384, n_positions=1024)
    model = GPT2LMHeadModel(cfg).to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        x = torch.randint(0, 16384, (16, 256), generator=g).to(dev)
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def nanogpt_lr(it, warmup=5, max_iters=30, lr=6e-4, min_lr=6e-5):
    """nanoGPT's schedule: linear warmup, cosine decay to min_lr."""
    import math
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > max_iters:
        return min_lr
    r = (it - warmup) / (max_iters - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * r)) * (lr - min_lr)


def job_nanogpt(torch, dev):
    import tempfile
    nn, F = torch.nn, torch.nn.functional
    V, T, D, H, L, B = 8192, 256, 384, 6, 4, 12

    class Attn(nn.Module):
        def __init__(s):
            super().__init__()
            s.qkv, s.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)

        def forward(s, x):
            b, t, _ = x.shape
            q, k, v = s.qkv(x).split(D, dim=2)
            q, k, v = (z.view(b, t, H, D // H).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return s.proj(y.transpose(1, 2).contiguous().view(b, t, D))

    class Block(nn.Module):
        def __init__(s):
            super().__init__()
            s.ln1, s.attn, s.ln2 = nn.LayerNorm(D), Attn(), nn.LayerNorm(D)
            s.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D), nn.Dropout(0.1))

        def forward(s, x):
            x = x + s.attn(s.ln1(x))
            return x + s.mlp(s.ln2(x))

    class GPT(nn.Module):
        def __init__(s):
            super().__init__()
            s.wte, s.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
            s.blocks = nn.ModuleList(Block() for _ in range(L))
            s.ln_f, s.head = nn.LayerNorm(D), nn.Linear(D, V, bias=False)
            s.head.weight = s.wte.weight  # weight tying

        def forward(s, idx, targets=None):
            x = s.wte(idx) + s.wpe(torch.arange(idx.shape[1], device=idx.device))
            for blk in s.blocks:
                x = blk(x)
            logits = s.head(s.ln_f(x))
            loss = None if targets is None else F.cross_entropy(logits.view(-1, V), targets.view(-1))
            return logits, loss

    model = GPT().to(dev)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=6e-4, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(2)
    data = {"train": torch.randint(0, V, (200000,), generator=g, dtype=torch.int32),
            "val": torch.randint(0, V, (20000,), generator=g, dtype=torch.int32)}

    def get_batch(split):
        d = data[split]
        ix = torch.randint(len(d) - T - 1, (B,), generator=g)
        x = torch.stack([d[i:i + T] for i in ix]).long()
        y = torch.stack([d[i + 1:i + 1 + T] for i in ix]).long()
        return x.pin_memory().to(dev, non_blocking=True), y.pin_memory().to(dev, non_blocking=True)

    ctx = torch.autocast("cuda", dtype=torch.bfloat16)

    @torch.no_grad()
    def estimate_loss():
        model.eval()
        out = {}
        for split in ("train", "val"):
            losses = torch.zeros(4)
            for k in range(4):
                x, y = get_batch(split)
                with ctx:
                    losses[k] = model(x, y)[1].item()
            out[split] = losses.mean().item()
        model.train()
        return out

    ckpt = os.path.join(tempfile.mkdtemp(prefix="nanogpt"), "ckpt.pt")
    x, y = get_batch("train")
    for it in range(31):
        for group in opt.param_groups:
            group["lr"] = nanogpt_lr(it)
        if it % 10 == 0 and it > 0:
            losses = estimate_loss()
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "iter": it,
                        "val_loss": losses["val"]}, ckpt)
        for _ in range(2):  # gradient accumulation
            with ctx:
                loss = model(x, y)[1] / 2
            x, y = get_batch("train")  # prefetch the next batch while the GPU works
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    os.remove(ckpt)


def job_resnet50(torch, dev):
    import torchvision
    F = torch.nn.functional
    model = torchvision.models.resnet50(num_classes=100).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    g = torch.Generator().manual_seed(3)
    for _ in range(4):
        x = torch.randn(32, 3, 160, 160, generator=g).to(dev)
        y = torch.randint(0, 100, (32,), generator=g).to(dev)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    model.eval()
    with torch.no_grad():
        model(torch.randn(32, 3, 160, 160, generator=g).to(dev)).argmax(1).cpu()


JOBS = {"hf_gpt2": job_hf_gpt2, "nanogpt": job_nanogpt, "resnet50": job_resnet50,
        "fragment": job_fragment}


def main(argv):
    if len(argv) == 3 and argv[0] == "fragment" and argv[1] == "--csv":
        fragment_csv(argv[2])
        return 0
    if len(argv) != 1 or argv[0] not in JOBS:
        print("usage: advice_jobs.py %s | fragment --csv OUT.csv" % "|".join(JOBS), file=sys.stderr)
        return 2
    import torch
    random.seed(0)
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = False
    dev = torch.device("cuda:0")
    t0 = time.time()
    JOBS[argv[0]](torch, dev)
    torch.cuda.synchronize()
    r = {"job": argv[0], "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
         "max_memory_reserved": torch.cuda.max_memory_reserved(),
         "max_memory_allocated": torch.cuda.max_memory_allocated(),
         "num_alloc_retries": torch.cuda.memory_stats().get("num_alloc_retries", 0),
         "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
         "seconds": round(time.time() - t0, 2)}
    print("GPUMEM_RESULT " + json.dumps(r, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
