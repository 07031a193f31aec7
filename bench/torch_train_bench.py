#!/usr/bin/python3
# torch_train_bench.py — times PyTorch training of GPT-2 124M (12 layers, 12 heads, 768 channels,
# context 1024, vocab 50257) on the CPU in float32, or with --dtype bf16 under
# torch.autocast('cpu', dtype=torch.bfloat16) (matmuls in bf16 through oneDNN, fp32 master weights,
# gradients and AdamW: the same "O2"-style mixed precision as gptc's --dtype bf16), using the same model as gptc's fixtures
# (tools/torch_gpt2.py), as the baseline for bench/train_vs_torch.sh. Each step: zero_grad,
# forward, backward, clip_grad_norm_(1.0), AdamW step, on random tokens. Prints one line per timed
# step and ends with exactly one summary line:
#   torch: median 1234.5 ms/step, 207.4 tokens/s (B=4 T=64 threads=2, N steps)
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))

import torch  # noqa: E402

from torch_gpt2 import GPT2, init_weights, make_adamw  # noqa: E402

CFG = dict(layers=12, heads=12, channels=768, context=1024, vocab=50257)


def loaded_blas():
    """The BLAS library this process actually mapped (Debian's torch calls libblas.so.3, which the
    alternatives system points at Netlib's reference BLAS unless OpenBLAS/BLIS is installed)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.rsplit("/", 1)[-1]}
    except OSError:
        return "unknown"
    return ", ".join(sorted(os.path.realpath(p) for p in libs)) or "none mapped"


def main():
    ap = argparse.ArgumentParser(description="Times GPT-2 124M training steps in PyTorch (float32, CPU).")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--warmup-steps", type=int, default=2, help="untimed steps first")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32",
                    help="bf16: forward under torch.autocast('cpu', dtype=torch.bfloat16)")
    a = ap.parse_args()
    if a.batch < 1 or a.seq < 1 or a.threads < 1 or a.steps < 1 or a.warmup_steps < 0:
        ap.error("batch, seq, threads and steps must be positive, warmup-steps not negative")
    if a.seq > CFG["context"]:
        ap.error(f"--seq must be at most {CFG['context']}")

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    model = GPT2(**CFG)
    init_weights(model, gen)
    model.train()
    nparams = sum(p.numel() for p in model.parameters())
    opt = make_adamw(model, 1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    params = list(model.parameters())
    V = CFG["vocab"]
    print(f"torch {torch.__version__}: GPT-2 {nparams / 1e6:.1f}M params, B={a.batch} T={a.seq} "
          f"threads={torch.get_num_threads()} dtype={a.dtype}, {a.warmup_steps} warmup + {a.steps} timed steps", flush=True)
    blas = loaded_blas()
    print(f"blas: {blas}", flush=True)
    if "/blas/libblas.so" in blas:
        print("warning: torch is using Netlib's reference BLAS (slow, single-threaded matmuls); "
              "`apt-get install libopenblas0-pthread` gives a fair baseline", flush=True)

    times = []
    for step in range(a.warmup_steps + a.steps):
        x = torch.randint(0, V, (a.batch, a.seq), generator=gen)
        y = torch.randint(0, V, (a.batch, a.seq), generator=gen)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            _, loss = model(x, y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        dt = time.perf_counter() - t0
        if step < a.warmup_steps:
            print(f"warmup {step + 1}: {dt * 1e3:.1f} ms, loss {loss.item():.4f}", flush=True)
            continue
        times.append(dt)
        print(f"step {len(times)}/{a.steps}: {dt * 1e3:.1f} ms, {a.batch * a.seq / dt:.1f} tokens/s, "
              f"loss {loss.item():.4f}, grad norm {float(norm):.4f}", flush=True)

    med = statistics.median(times)
    print(f"torch: median {med * 1e3:.1f} ms/step, {a.batch * a.seq / med:.1f} tokens/s "
          f"(B={a.batch} T={a.seq} threads={a.threads} {a.dtype}, {a.steps} steps)")


if __name__ == "__main__":
    main()
