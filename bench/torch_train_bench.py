#!/usr/bin/python3
# torch_train_bench.py — times PyTorch training of GPT-2 124M (12 layers, 12 heads, 768 channels,
# context 1024, vocab 50257) on the CPU in float32, or with --dtype bf16 under
# torch.autocast('cpu', dtype=torch.bfloat16) (matmuls in bf16 through oneDNN, fp32 master weights,
# gradients and AdamW: the same "O2"-style mixed precision as gptc's --dtype bf16), using the same
# model as gptc's fixtures (tools/torch_gpt2.py): the peer of bench/train_e2e.sh, train_bf16.sh and
# train_vs_torch.sh, which run it in its strongest configuration (bench/lib.sh's peer_run: tcmalloc,
# OpenBLAS's OpenMP build and AVX-512 kernels, pinned threads). Each step: zero_grad, forward,
# backward, clip_grad_norm_(1.0), AdamW step, on random tokens.
# Before the first step it prints the configuration it actually got: the BLAS it mapped ("blas:"),
# then torch's threads, OpenBLAS's kernel set (openblas_get_corename), whether tcmalloc is mapped
# (/proc/self/maps), the main thread's CPUs and the environment that chose them ("config:"); it exits
# 1 with one line when that is not what was asked for (tcmalloc in LD_PRELOAD but not mapped,
# OPENBLAS_CORETYPE set but other kernels running, another thread count than --threads).
# Then one line per timed step, and exactly one summary line:
#   torch: median 1234.5 ms/step, 207.4 tokens/s (B=4 T=64 threads=2 fp32, N steps)
import argparse
import ctypes
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))

import torch  # noqa: E402

from torch_gpt2 import GPT2, init_weights, make_adamw  # noqa: E402

CFG = dict(layers=12, heads=12, channels=768, context=1024, vocab=50257)


def mapped(pred):
    """The real paths of the shared objects this process mapped whose file name satisfies pred."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "/" in line}
    except OSError:
        return None
    return sorted({os.path.realpath(p) for p in paths if pred(p.rsplit("/", 1)[-1])})


def openblas_core(paths):
    """The kernel set ("core") and build string of the OpenBLAS among paths, asked of the copy already
    loaded (RTLD_NOLOAD), or None when no OpenBLAS is mapped."""
    for p in paths:
        if "openblas" not in p.rsplit("/", 1)[-1]:
            continue
        try:
            lib = ctypes.CDLL(p, mode=os.RTLD_NOLOAD)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            lib.openblas_get_config.restype = ctypes.c_char_p
            return lib.openblas_get_corename().decode(), lib.openblas_get_config().decode()
        except (OSError, AttributeError):
            continue
    return None


def configuration(want_threads):
    """Prints the configuration this process actually got (threads, the BLAS and its kernels, the
    allocator, the environment that chose them) as two lines, and returns an error line when it is not
    the one asked for: tcmalloc named in LD_PRELOAD but not mapped, OPENBLAS_CORETYPE set but OpenBLAS
    running other kernels, or a thread count other than --threads."""
    blas = mapped(lambda name: "blas" in name)
    tcm = mapped(lambda name: "tcmalloc" in name)
    core = openblas_core(blas or [])
    env = {k: os.environ.get(k, "(unset)") for k in
           ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "LD_PRELOAD")}
    cpus = sorted(os.sched_getaffinity(0))
    print(f"blas: {', '.join(blas) if blas else ('none mapped' if blas is not None else 'unknown')}", flush=True)
    print(f"config: torch threads {torch.get_num_threads()} (interop {torch.get_num_interop_threads()}), "
          f"OpenBLAS core {core[0] if core else '(no OpenBLAS)'}, "
          f"tcmalloc {'mapped (' + ', '.join(tcm) + ')' if tcm else 'not mapped'}, "
          f"main thread on CPUs {','.join(map(str, cpus))}, "
          + ", ".join(f"{k}={v}" for k, v in env.items()), flush=True)
    if blas and any("/blas/libblas.so" in p for p in blas):
        print("warning: torch is using Netlib's reference BLAS (slow, single-threaded matmuls); "
              "sh tools/setup.sh --bench installs OpenBLAS, and bench/lib.sh's peer_run uses it", flush=True)
    if "tcmalloc" in os.environ.get("LD_PRELOAD", "") and not tcm:
        return f"LD_PRELOAD asks for tcmalloc ({os.environ['LD_PRELOAD']}) but it is not mapped; " \
               "check the path (sh tools/setup.sh --bench installs libtcmalloc-minimal4)"
    want_core = os.environ.get("OPENBLAS_CORETYPE", "")
    if want_core and core and core[0].lower() != want_core.lower():
        return f"OPENBLAS_CORETYPE={want_core} but OpenBLAS runs its {core[0]} kernels ({core[1]})"
    if torch.get_num_threads() != want_threads:
        return f"--threads {want_threads} but torch runs {torch.get_num_threads()} threads"
    return None


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
    torch.ones(64, 64) @ torch.ones(64, 64)  # loads and starts the BLAS before it is inspected
    err = configuration(a.threads)
    if err:
        print(f"torch_train_bench: {err}", file=sys.stderr)
        sys.exit(1)
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
