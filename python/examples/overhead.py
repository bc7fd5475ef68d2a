"""What `memviz.record` costs a training step: the mean step time of a GPT-2 (random weights,
GPT-2 small's shape by default) with and without it, alternated over a few repeats, as JSON.

    python overhead.py [--layers 12 --embd 768 --batch 8 --seq 512 --steps 30 --repeats 3]

The recorded runs also report the exit dump's time and size. Needs torch with CUDA and
transformers.
"""

import argparse
import json
import os
import statistics
import tempfile
import time

import torch

import memviz


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--embd", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=30, help="timed steps per run")
    p.add_argument("--repeats", type=int, default=3, help="runs of each kind, alternated")
    p.add_argument("--stacks", choices=("python", "all"), default="python")
    return p.parse_args()


def main():
    args = parse()
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=args.layers, n_embd=args.embd, n_head=args.heads, vocab_size=args.vocab,
                        n_positions=args.seq)
    model = GPT2LMHeadModel(config).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def train(n):
        """Mean milliseconds of `n` steps, each synchronised."""
        times = []
        for _ in range(n):
            with memviz.step():
                ids = torch.randint(0, args.vocab, (args.batch, args.seq), device="cuda")
                torch.cuda.synchronize()
                start = time.perf_counter()
                model(input_ids=ids, labels=ids).loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - start)
        return 1e3 * statistics.mean(times)

    train(args.warmup)
    baseline, recorded, dump_s, dump_mb = [], [], [], []
    with tempfile.TemporaryDirectory() as out:
        for _ in range(args.repeats):
            baseline.append(train(args.steps))
            rec = memviz.record(out, stacks=args.stacks)
            with rec:
                recorded.append(train(args.steps))
                stopping = time.perf_counter()
            dump_s.append(time.perf_counter() - stopping)
            dump_mb.append(os.path.getsize(os.path.join(out, "rank0.exit.pickle")) / 1e6)
    base, with_record = statistics.median(baseline), statistics.median(recorded)
    print(json.dumps({
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "model": {"layers": args.layers, "embd": args.embd, "vocab": args.vocab, "batch": args.batch,
                  "seq": args.seq, "parameters": sum(p.numel() for p in model.parameters())},
        "stacks": args.stacks,
        "max_entries": rec.max_entries,
        "steps_per_run": args.steps,
        "baseline_step_ms": [round(x, 3) for x in baseline],
        "record_step_ms": [round(x, 3) for x in recorded],
        "baseline_ms": round(base, 3),
        "record_ms": round(with_record, 3),
        "overhead_pct": round(100 * (with_record / base - 1), 2),
        "exit_dump_s": [round(x, 3) for x in dump_s],
        "snapshot_mb": [round(x, 1) for x in dump_mb],
    }, indent=1))


if __name__ == "__main__":
    main()
