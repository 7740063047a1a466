#!/usr/bin/env python3
"""self_check_jobs.py: real models, built from the libraries' own code and configs (random
weights, random data, nothing downloaded), trained a few steps: the jobs of the replay's check
against its own run (tests/gpu/self_check.sh).

  python3 self_check_jobs.py JOB BATCH       run on cuda:0; prints `GPUMEM_RESULT {json}`
  python3 self_check_jobs.py --list          the jobs, one a line

Convolutional jobs (cuDNN picks algorithms and workspaces per shape) and transformers from
torchvision, timm and transformers; SGD with momentum for the conv nets, AdamW for the rest;
some under bf16 autocast. The result: torch.cuda.max_memory_reserved() and
max_memory_allocated() of this process, the allocator setting in force, the device."""
import json
import os
import sys

JOBS = {
    # name: (family, builder args, image side or sequence length, optimizer, autocast)
    "tv_resnet18": ("tv", "resnet18", 160, "sgd", False),
    "tv_resnet50": ("tv", "resnet50", 160, "sgd", False),
    "tv_resnet50_bf16": ("tv", "resnet50", 160, "sgd", True),
    "tv_mobilenet_v3": ("tv", "mobilenet_v3_large", 160, "sgd", False),
    "tv_vgg11_bn": ("tv", "vgg11_bn", 128, "sgd", False),
    "tv_densenet121": ("tv", "densenet121", 128, "sgd", False),
    "tv_efficientnet_b0": ("tv", "efficientnet_b0", 160, "sgd", False),
    "tv_convnext_tiny": ("tv", "convnext_tiny", 160, "adamw", False),
    "timm_vit_small": ("timm", "vit_small_patch16_224", 224, "adamw", False),
    "hf_bert": ("hf", "bert", 128, "adamw", False),
    "hf_t5": ("hf", "t5", 128, "adamw", False),
    "hf_llama_bf16": ("hf", "llama", 256, "adamw", True),
    "hf_vit": ("hf", "vit", 224, "adamw", False),
    "hf_gpt2_ckpt": ("hf", "gpt2", 256, "adamw", False),
    "hf_gpt2_generate": ("hf", "gpt2", 0, "none", False),
    "tv_resnet50_fp16": ("tv", "resnet50", 160, "sgd", "fp16"),
    "tv_resnet50_compile": ("tv", "resnet50", 160, "sgd", False),
}


def build(torch, name):
    fam, arch, side, _, _ = JOBS[name]
    if fam == "tv":
        import torchvision
        return getattr(torchvision.models, arch)(num_classes=100)
    if fam == "timm":
        import timm
        return timm.create_model(arch, pretrained=False, num_classes=100)
    import transformers as t
    if arch == "bert":
        return t.BertForMaskedLM(t.BertConfig(vocab_size=16384, hidden_size=512, num_hidden_layers=6,
                                              num_attention_heads=8, intermediate_size=2048))
    if arch == "t5":
        return t.T5ForConditionalGeneration(t.T5Config(vocab_size=16384, d_model=384, d_ff=1536, num_layers=4,
                                                       num_decoder_layers=4, num_heads=6,
                                                       decoder_start_token_id=0, pad_token_id=0))
    if arch == "llama":
        return t.LlamaForCausalLM(t.LlamaConfig(vocab_size=16384, hidden_size=512, intermediate_size=1408,
                                                num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
                                                max_position_embeddings=1024))
    if arch == "gpt2":
        m = t.GPT2LMHeadModel(t.GPT2Config(vocab_size=16384, n_positions=1024, n_embd=512, n_layer=6, n_head=8))
        if name == "hf_gpt2_ckpt":
            m.gradient_checkpointing_enable()
        return m
    if arch == "vit":
        return t.ViTForImageClassification(t.ViTConfig(image_size=224, hidden_size=384, num_hidden_layers=6,
                                                       num_attention_heads=6, intermediate_size=1536, num_labels=100))
    raise SystemExit("unknown arch " + arch)


def step(torch, name, model, batch, dev, gen):
    fam, arch, side, _, _ = JOBS[name]
    if fam in ("tv", "timm") or arch == "vit":
        x = torch.randn(batch, 3, side, side, device=dev, generator=gen)
        y = torch.randint(0, 100, (batch,), device=dev, generator=gen)
        if arch == "vit":
            return model(pixel_values=x, labels=y).loss
        return torch.nn.functional.cross_entropy(model(x), y)
    ids = torch.randint(0, 16384, (batch, side), device=dev, generator=gen)
    if arch == "t5":
        return model(input_ids=ids, labels=ids[:, : side // 2].contiguous()).loss
    return model(input_ids=ids, labels=ids).loss


def main():
    if sys.argv[1:] == ["--list"]:
        print("\n".join(JOBS))
        return
    name, batch = sys.argv[1], int(sys.argv[2])
    import torch
    dev = torch.device("cuda")
    torch.manual_seed(0)
    gen = torch.Generator(device=dev)
    gen.manual_seed(0)
    model = build(torch, name).to(dev)
    _, _, _, opt_name, amp = JOBS[name]
    if opt_name == "none":  # inference: greedy generation for prompts of several lengths, batch BATCH
        model.eval()
        with torch.no_grad():
            for n in (40, 200, 96, 160):
                ids = torch.randint(0, 16384, (batch, n), device=dev, generator=gen)
                model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=24, do_sample=False,
                               pad_token_id=0)
    else:
        model.train()
        if name.endswith("_compile"):
            model = torch.compile(model)
        opt = (torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9) if opt_name == "sgd"
               else torch.optim.AdamW(model.parameters(), lr=1e-4))
        scaler = torch.amp.GradScaler("cuda") if amp == "fp16" else None
        for _ in range(3):
            with torch.autocast("cuda", dtype=torch.float16 if amp == "fp16" else torch.bfloat16, enabled=bool(amp)):
                loss = step(torch, name, model, batch, dev, gen)
            if scaler:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    print("GPUMEM_RESULT " + json.dumps({
        "job": name, "batch": batch, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "device": torch.cuda.get_device_name(0), "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
