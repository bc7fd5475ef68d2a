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


def start(stacks):
    import torch
    torch.cuda.memory._record_memory_history(stacks=stacks, max_entries=1_000_000)


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
    for _ in range(3):
        b = batch()
        loss = lossf(b)
        loss.backward()
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
        # A compiled graph runs its backward as one node: dump when half the gradients exist.
        params = list(model.parameters())
        seen = []

        def on_grad(p):
            seen.append(p)
            if len(seen) == len(params) // 2 and not truth:
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
    if name == "fsdp_adamw":
        torch.distributed.destroy_process_group()
    return {"scenario": name, "torch": torch.__version__, "truth": len(truth), "seconds": round(time.time() - t0, 1)}


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
