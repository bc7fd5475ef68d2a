"""Record training jobs whose steps are not marked `## step N ##` (run on a GPU machine).

Usage: python3 record_steps.py OUTDIR [scenario ...]   (needs torch, transformers, lightning)

Each scenario writes NAME.pickle and NAME.steps.json: `step_starts`, the length of device 0's
trace when each training step began (so the index of the step's first trace event), read with
`torch.cuda.memory._snapshot()` at the step's start, outside the recorded allocations.

  lightning_fit     Lightning `Trainer.fit`, GPT-2 (4 x 256) + Adam, 8 steps, annotations recorded
                    (global_record_annotations): Lightning's and the optimizer's own spans, no
                    `## step N ##`
  lightning_plain   the same job recorded with `_record_memory_history()`'s defaults: no spans
  plain_loop        a hand-written GPT-2 + AdamW loop, 6 steps, no spans, Python stacks
  fsdp2_steps       GPT-2 under FSDP2 (fully_shard per block, world size 1) + AdamW, 5 steps in
                    `## step N ##` spans; FSDP2 adds its per-layer spans
                    (`FSDP::post_backward_reduce` ...)
"""
import json, os, subprocess, sys, time


def start(annotations):
    import torch
    kw = {"global_record_annotations": True} if annotations else {}
    torch.cuda.memory._record_memory_history(stacks="python", max_entries=1_000_000, **kw)


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config(n_layer=4, n_embd=256, n_head=8, vocab_size=8192, n_positions=256))


def trace_len():
    import torch
    traces = torch.cuda.memory._snapshot()["device_traces"]
    return len(traces[0]) if traces else 0


def lightning(annotations, starts):
    import torch
    try:
        import lightning as L
    except ImportError:
        import pytorch_lightning as L
    from torch.utils.data import DataLoader, TensorDataset

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = gpt2()

        def training_step(self, batch, i):
            ids = batch[0]
            return self.model(input_ids=ids, labels=ids).loss

        def on_train_batch_start(self, batch, i):
            starts.append(trace_len())

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-4)

    data = DataLoader(TensorDataset(torch.randint(0, 8192, (64, 128))), batch_size=8)
    start(annotations)
    trainer = L.Trainer(max_steps=8, accelerator="gpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Module(), data)


def plain_loop(starts):
    import torch
    start(False)
    model = gpt2().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(6):
        starts.append(trace_len())
        ids = torch.randint(0, 8192, (8, 128), device="cuda")
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def fsdp2(starts):
    import torch, torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29514")
    dist.init_process_group("nccl", rank=0, world_size=1)
    torch.cuda.set_device(0)
    start(True)
    model = gpt2().cuda()
    for block in model.transformer.h:
        fully_shard(block)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(5):
        starts.append(trace_len())
        with torch.profiler.record_function(f"## step {step} ##"):
            ids = torch.randint(0, 8192, (8, 128), device="cuda")
            model(input_ids=ids, labels=ids).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


def run(name, out):
    import torch
    t0 = time.time()
    starts = []
    if name == "lightning_fit":
        lightning(True, starts)
    elif name == "lightning_plain":
        lightning(False, starts)
    elif name == "plain_loop":
        plain_loop(starts)
    elif name == "fsdp2_steps":
        fsdp2(starts)
    else:
        raise SystemExit("unknown scenario " + name)
    torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(out)
    torch.cuda.memory._record_memory_history(enabled=None)
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    json.dump({"step_starts": starts}, open(out.replace(".pickle", ".steps.json"), "w"))
    return {"scenario": name, "torch": torch.__version__, "steps": len(starts), "seconds": round(time.time() - t0, 1)}


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
