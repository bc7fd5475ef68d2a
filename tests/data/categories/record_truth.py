"""Record snapshots with ground truth for memory categories (run on a GPU machine).

Usage: python3 record_truth.py OUTDIR [scenario ...]   (needs torch, torchvision, transformers)

Each scenario trains a few steps, then dumps the snapshot from a backward hook in the middle of
the next step's backward, and writes NAME.truth.json beside it: for every storage that is a
parameter, a gradient, an optimizer state tensor or a tensor saved for backward (and still
alive) at the dump, its address -> [category, bytes, name]. The scenarios differ from
../shared/tools/record_snapshots.py's `categories` on purpose: no annotations at all (the phases
come from the frames alone), other models, other optimizers, C++ frames, torch.compile.

  resnet_sgd      ResNet-18 + SGD with momentum, Python stacks, no annotations
  gpt2_cpp_adam   GPT-2 + Adam, stacks="all" (C++ frames: the autograd engine's), no annotations
  compiled_adamw  torch.compile'd GPT-2 + AdamW, Python stacks (saved tensors live inside the
                  compiled graph: parameters, gradients and optimizer state only)
  fsdp_adamw      GPT-2 under FSDP2 (fully_shard per block, one process, world size 1) + AdamW:
                  the truth's parameters and gradients are FSDP's sharded ones (the unsharded
                  copies a block holds while it computes are all-gather outputs and
                  reduce-scatter inputs: communication, left out of the truth)
"""
import json, os, subprocess, sys, time, weakref


def start(stacks, annotations=False):
    """`annotations=True` records `record_function` spans (global_record_annotations); the default
    is what `_record_memory_history()` records with no arguments: none."""
    import torch
    kw = {"global_record_annotations": True} if annotations else {}
    torch.cuda.memory._record_memory_history(stacks=stacks, max_entries=1_000_000, **kw)


def ddp_init(port):
    import torch, torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(port))
    dist.init_process_group("nccl", rank=0, world_size=1)
    torch.cuda.set_device(0)


def lora_llama():
    """A bf16 Llama with gradient checkpointing, its q/v projections wrapped in LoRA adapters that
    user code creates (rank 16), the base frozen."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    class Lora(torch.nn.Module):
        def __init__(self, base, r=16):
            super().__init__()
            self.base = base
            self.a = torch.nn.Parameter(torch.randn(r, base.in_features, device="cuda", dtype=torch.bfloat16) * 0.01)
            self.b = torch.nn.Parameter(torch.zeros(base.out_features, r, device="cuda", dtype=torch.bfloat16))

        def forward(self, x):
            return self.base(x) + (x @ self.a.t()) @ self.b.t()

    cfg = LlamaConfig(hidden_size=512, intermediate_size=1408, num_hidden_layers=6, num_attention_heads=8,
                      num_key_value_heads=8, vocab_size=8192, max_position_embeddings=512)
    model = LlamaForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16)
    model.requires_grad_(False)
    for layer in model.model.layers:
        layer.self_attn.q_proj = Lora(layer.self_attn.q_proj)
        layer.self_attn.v_proj = Lora(layer.self_attn.v_proj)
    model.gradient_checkpointing_enable()
    model.enable_input_require_grads()
    model.config.use_cache = False
    return model


def gpt2(n_layer=4, n_embd=256, vocab=8192):
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config(n_layer=n_layer, n_embd=n_embd, n_head=8, vocab_size=vocab, n_positions=256))


def run(name, out):
    import torch
    t0 = time.time()
    if name == "resnet_sgd":
        import torchvision
        start("python")
        model = torchvision.models.resnet18(num_classes=100).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        batch = lambda: (torch.randn(32, 3, 96, 96, device="cuda"), torch.randint(0, 100, (32,), device="cuda"))
        lossf = lambda b: torch.nn.functional.cross_entropy(model(b[0]), b[1])
        hook_mod = lambda: model.layer2
        save_hooks = True
    elif name == "gpt2_cpp_adam":
        start("all")
        model = gpt2().cuda()
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        batch = lambda: torch.randint(0, 8192, (8, 128), device="cuda")
        lossf = lambda b: model(input_ids=b, labels=b).loss
        hook_mod = lambda: model.transformer.h[1]
        save_hooks = True
    elif name == "compiled_adamw":
        start("python")
        model = gpt2().cuda()
        compiled = torch.compile(model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        batch = lambda: torch.randint(0, 8192, (8, 128), device="cuda")
        lossf = lambda b: compiled(input_ids=b, labels=b).loss
        hook_mod = None
        save_hooks = False
    elif name == "fsdp_adamw":
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29512")
        dist.init_process_group("nccl", rank=0, world_size=1)
        torch.cuda.set_device(0)
        start("python")
        model = gpt2().cuda()
        for block in model.transformer.h:
            fully_shard(block)
        fully_shard(model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        batch = lambda: torch.randint(0, 8192, (8, 128), device="cuda")
        lossf = lambda b: model(input_ids=b, labels=b).loss
        hook_mod = lambda: model.transformer.h[1]
        save_hooks = True
    elif name == "gpt2_plain_adamw":
        # The loop most people write: no annotations, Python stacks (the autograd engine's thread
        # allocates the gradients with no Python frame at all), dumped when every gradient exists.
        start("python")
        model = gpt2().cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        batch = lambda: torch.randint(0, 8192, (8, 128), device="cuda")
        lossf = lambda b: model(input_ids=b, labels=b).loss
        hook_mod = None
        save_hooks = True
    elif name == "ddp_buckets":
        # DDP with gradient_as_bucket_view=True: the gradients are views into DDP's buckets.
        from torch.nn.parallel import DistributedDataParallel as DDP
        ddp_init(29513)
        start("python")
        inner = gpt2().cuda()
        model = DDP(inner, gradient_as_bucket_view=True, bucket_cap_mb=4)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        batch = lambda: torch.randint(0, 8192, (8, 128), device="cuda")
        lossf = lambda b: model(input_ids=b, labels=b).loss
        hook_mod = lambda: inner.transformer.h[1]
        save_hooks = True
    elif name == "lora_llama":
        start("python")
        model = lora_llama()
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
        batch = lambda: torch.randint(0, 8192, (8, 256), device="cuda")
        lossf = lambda b: model(input_ids=b, labels=b).loss
        hook_mod = None
        save_hooks = True
    else:
        raise SystemExit("unknown scenario " + name)
    local = lambda t: t.to_local() if hasattr(t, "to_local") else t

    def sharded(model):
        """(name, parameter) — under FSDP2 its sharded parameters, not the unsharded copies a
        block swaps in while it computes."""
        try:
            from torch.distributed.fsdp import FSDPModule
        except ImportError:
            FSDPModule = ()
        out = []
        for m in model.modules():
            if isinstance(m, FSDPModule):
                group = m._get_fsdp_state()._fsdp_param_group
                out += [(fp._param_fqn, fp.sharded_param) for fp in (group.fsdp_params if group else [])]
        return out or list(model.named_parameters())
    buckets = {}  # DDP's gradient buckets (the storages its parameters' .grad are views of)
    for _ in range(3):
        b = batch()
        loss = lossf(b)
        loss.backward()
        buckets.clear()  # the first step's buckets are rebuilt (freed) in the second's forward
        for p in model.parameters():
            if p.grad is not None and p.grad.untyped_storage().nbytes() > p.grad.nbytes and name == "ddp_buckets":
                s = p.grad.untyped_storage()
                buckets[s.data_ptr()] = s.nbytes()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss, b
    saved = []

    def pack(t):
        try:
            saved.append(weakref.ref(t))
        except TypeError:
            pass
        return t

    truth = {}

    def dump():
        torch.cuda.synchronize()
        for ptr, n in buckets.items():
            truth[ptr] = ["gradient", n, "DDP bucket"]
        for n, p in sharded(model):
            s = local(p).untyped_storage()
            truth[s.data_ptr()] = ["parameter", s.nbytes(), n]
            if p.grad is not None:
                g = local(p.grad).untyped_storage()
                truth[g.data_ptr()] = ["gradient", g.nbytes(), n]
        # The optimizer holds the sharded parameters: its state is keyed by them.
        for p, st in opt.state.items():
            for k, v in st.items():
                v = local(v) if torch.is_tensor(v) else v
                if torch.is_tensor(v) and v.is_cuda:
                    truth[v.untyped_storage().data_ptr()] = ["optimizer_state", v.untyped_storage().nbytes(), k]
        unsharded = set()  # FSDP's all-gather outputs (saved weights point at them): communication
        try:
            from torch.distributed.fsdp import FSDPModule
            for m in model.modules():
                group = m._get_fsdp_state()._fsdp_param_group if isinstance(m, FSDPModule) else None
                for fp in group.fsdp_params if group else []:
                    u = getattr(fp, "_unsharded_param", None)
                    if u is not None and u.untyped_storage().nbytes() > 0:
                        unsharded.add(u.untyped_storage().data_ptr())
        except ImportError:
            pass
        for r in saved:
            t = r()
            t = local(t) if t is not None else None
            if t is not None and t.is_cuda and t.untyped_storage().data_ptr() not in unsharded:
                s = t.untyped_storage()
                truth.setdefault(s.data_ptr(), ["activation", s.nbytes(), "saved for backward"])
        torch.cuda.memory._dump_snapshot(out)

    b = batch()
    if hook_mod is not None:
        h = hook_mod().register_full_backward_hook(lambda m, gi, go: None if truth else dump())
    else:
        # A compiled graph runs its backward as one node: dump when half the gradients exist;
        # the others dump when the last one does (before the optimizer step).
        params = [p for p in model.parameters() if p.requires_grad]
        seen = []
        when = len(params) // 2 if name == "compiled_adamw" else len(params)

        def on_grad(p):
            seen.append(p)
            if len(seen) == when and not truth:
                dump()

        hs = [p.register_post_accumulate_grad_hook(on_grad) for p in params]
    if save_hooks:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = lossf(b)
    else:
        loss = lossf(b)
    loss.backward()
    if hook_mod is not None:
        h.remove()
    else:
        for x in hs:
            x.remove()
    torch.cuda.memory._record_memory_history(enabled=None)
    json.dump({hex(k): v for k, v in truth.items()}, open(out + ".truth.json", "w"), indent=0)
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    kinds = {}
    for c, n, _ in truth.values():
        kinds[c] = kinds.get(c, 0) + n
    return {"scenario": name, "torch": torch.__version__, "truth": len(truth), "bytes_by_kind": kinds,
            "ddp_buckets": len(buckets), "seconds": round(time.time() - t0, 1)}


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        info = run(sys.argv[2], sys.argv[3])
        info["bytes"] = os.path.getsize(sys.argv[3])
        print(json.dumps(info))
        sys.exit(0)
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    for name in sys.argv[2:]:
        out = os.path.join(outdir, name + ".pickle")
        r = subprocess.run([sys.executable, __file__, "--one", name, out], capture_output=True, text=True)
        print(name, "rc", r.returncode, r.stdout.strip()[-400:], r.stderr.strip()[-1500:] if r.returncode else "",
              flush=True)
