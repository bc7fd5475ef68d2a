"""Run out of GPU memory on purpose, recorded by memviz: the snapshot it leaves explains the OOM.

A small GPT-2 (random weights: nothing is downloaded) trains under a memory cap while its forward
keeps one tensor per step (a leak), until the allocator runs out. memviz dumps OUT/rank0.oom.pickle
from torch's OOM observer before the error unwinds; the script catches the error and exits 0.

    python oom_demo.py snapshots/plain                       # memviz.record + memviz.step
    python oom_demo.py snapshots/lightning --mode lightning  # memviz.lightning.MemvizCallback
    python oom_demo.py snapshots/hf --mode hf                # memviz.transformers.MemvizCallback
    memviz oom snapshots/plain/rank0.oom.pickle

Needs torch with CUDA and transformers (and Lightning for --mode lightning).
"""

import argparse
import os
import sys
import tempfile

import torch

VOCAB = 8192


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="the folder memviz writes rank0.oom.pickle into")
    p.add_argument("--mode", choices=("plain", "lightning", "hf"), default="plain")
    p.add_argument("--cap-mib", type=int, default=1024, help="the allocator's cap for this process")
    p.add_argument("--leak-mib", type=int, default=64, help="what each step's forward keeps")
    p.add_argument("--steps", type=int, default=200, help="at most this many steps (the cap ends it first)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    return p.parse_args()


def leaky_gpt2(leak_bytes):
    """GPT-2, 4 layers × 256, on the CPU; each forward keeps a `leak_bytes` CUDA tensor."""
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(n_layer=4, n_embd=256, n_head=8, vocab_size=VOCAB, n_positions=256))
    kept = []

    def keep_one(module, inputs, output):
        kept.append(torch.empty(leak_bytes, dtype=torch.uint8, device="cuda"))

    model.register_forward_hook(keep_one)
    return model


def plain(args, leak_bytes):
    import memviz

    with memviz.record(args.out):  # before the model reaches the GPU: every tensor has its stack
        model = leaky_gpt2(leak_bytes).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        for _ in range(args.steps):
            with memviz.step():
                ids = torch.randint(0, VOCAB, (args.batch, args.seq), device="cuda")
                model(input_ids=ids, labels=ids).loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)


def lightning(args, leak_bytes):
    try:
        import lightning.pytorch as pl
    except ImportError:
        import pytorch_lightning as pl
    from memviz.lightning import MemvizCallback

    class LitGPT2(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = leaky_gpt2(leak_bytes)

        def training_step(self, batch, batch_idx):
            (ids,) = batch
            return self.model(input_ids=ids, labels=ids).loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    ids = torch.randint(0, VOCAB, (args.steps * args.batch, args.seq))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(ids), batch_size=args.batch)
    trainer = pl.Trainer(accelerator="gpu", devices=1, max_steps=args.steps, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         callbacks=[MemvizCallback(args.out)])
    trainer.fit(LitGPT2(), loader)


def hf(args, leak_bytes):
    from transformers import Trainer, TrainingArguments
    from memviz.transformers import MemvizCallback

    class RandomIds(torch.utils.data.Dataset):
        def __len__(self):
            return args.steps * args.batch

        def __getitem__(self, i):
            ids = torch.randint(0, VOCAB, (args.seq,))
            return {"input_ids": ids, "labels": ids}

    with tempfile.TemporaryDirectory() as scratch:
        training = TrainingArguments(output_dir=scratch, per_device_train_batch_size=args.batch,
                                     max_steps=args.steps, report_to="none", save_strategy="no",
                                     logging_strategy="no", disable_tqdm=True, dataloader_num_workers=0)
        recorder = MemvizCallback(args.out)  # recording starts here, before the Trainer moves the model
        trainer = Trainer(model=leaky_gpt2(leak_bytes), args=training, train_dataset=RandomIds(),
                          callbacks=[recorder])
        trainer.train()


def main():
    args = parse()
    if not torch.cuda.is_available():
        sys.exit("oom_demo.py needs a CUDA GPU")
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, args.cap_mib * 2**20 / total))
    run = {"plain": plain, "lightning": lightning, "hf": hf}[args.mode]
    try:
        run(args, args.leak_mib * 2**20)
    except Exception as e:  # a framework may wrap it; torch's message says what it is
        if not isinstance(e, torch.cuda.OutOfMemoryError) and "out of memory" not in str(e):
            raise
        print(f"out of memory, as planned: {str(e).splitlines()[0]}")
    else:
        sys.exit(f"no out-of-memory error in {args.steps} steps: lower --cap-mib or raise --leak-mib")
    oom = os.path.join(args.out, "rank0.oom.pickle")
    if not os.path.isfile(oom):
        sys.exit(f"memviz wrote no {oom}")
    print(f"{oom}: {os.path.getsize(oom):,} bytes; files: {sorted(os.listdir(args.out))}")
    print(f"explain it with: memviz oom {oom}")


if __name__ == "__main__":
    main()
