#!/usr/bin/python3
"""thread_model.py — how a GPT-2 training step divides over 8 to 64 cores: the model behind the
"Threads: 8 to 64 cores" section of docs/performance.md.

For each matrix product of a GPT-2 step it applies the GEMM driver's thread grid rule
(src/kernels/gemm/gemm_driver.c: choose_grid, 12 x 32 micro-tiles, the A_IN_L1 order's packing
count) and prints, per thread count, the micro-tiles each thread computes and the packing overhead
(elements packed x 16 multiply-adds each, against the thread's multiply-adds). Then it adds the
memory-bound passes (bytes per step: AdamW 28 B/parameter, gradient norm 4 B, the activation passes
measured by the profiler) at a bandwidth that grows with cores up to the socket's ceiling, and prints
the step time each part would take and where the ceiling falls. Inputs are flags; the defaults are
the figures measured on the 2-core machine where it was written (see the docs section).
"""
import argparse
import math


def grid(nt, mpan, npan, mr, nr, mc):
    best = None
    for a in range(1, nt + 1):
        if nt % a:
            continue
        b = nt // a
        rows = math.ceil(mpan / a) * mr
        cols = math.ceil(npan / b) * nr
        packed = rows + cols * math.ceil(rows / mc)
        cost = rows * cols + 16.0 * packed
        if best is None or cost < best[0]:
            best = (cost, a, b, rows, cols, packed)
    return best


def products(bt, C=768, V=50257):
    out = []
    for name, ic, oc in (("qkv", C, 3 * C), ("attn proj", C, C), ("fc", C, 4 * C), ("fc proj", 4 * C, C)):
        out += [(name + " fwd", bt, oc, ic), (name + " dinp", bt, ic, oc), (name + " dW", ic, oc, bt)]
    out += [("classifier fwd", bt, V, C), ("classifier dinp", bt, C, V), ("classifier dW", V, C, bt)]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bt", type=int, nargs="+", default=[1024, 4096], help="tokens per rank per step (B*T)")
    ap.add_argument("--threads", type=int, nargs="+", default=[2, 8, 16, 32, 64])
    ap.add_argument("--core-gflops", type=float, default=176.0, help="fp32 FMA peak of one core (GFLOP/s)")
    ap.add_argument("--gemm-eff", type=float, default=0.65, help="fraction of peak the GEMM reaches")
    ap.add_argument("--core-gbs", type=float, default=13.7, help="triad bandwidth one core reaches (GB/s)")
    ap.add_argument("--socket-gbs", type=float, default=250.0, help="triad bandwidth of one socket (GB/s)")
    ap.add_argument("--params", type=float, default=124.44e6)
    ap.add_argument("--act-bytes-per-token", type=float, default=3.32e6,
                    help="bytes the memory-bound activation passes move per token (profiler)")
    a = ap.parse_args()
    mr, nr, mc = 12, 32, 4092
    for bt in a.bt:
        print(f"\n**B·T = {bt} tokens per rank**\n")
        print("| product | M x N x K | " + " | ".join(f"{n} thr: tiles/thr, pack %" for n in a.threads) + " |")
        print("|---|---|" + "---|" * len(a.threads))
        for name, M, N, K in products(bt):
            cells = []
            for n in a.threads:
                mpan, npan = math.ceil(M / mr), math.ceil(N / nr)
                nt = min(n, mpan * npan)
                cost, ta, tb, rows, cols, packed = grid(nt, mpan, npan, mr, nr, mc)
                tiles = math.ceil(rows / mr) * math.ceil(cols / nr)
                cells.append(f"{tiles}, {100 * 16 * packed / (rows * cols):.1f} %")
            print(f"| {name} | {M}x{N}x{K} | " + " | ".join(cells) + " |")
        flops = 6 * a.params * bt  # PaLM's matmul FLOPs without attention
        mem = 28 * a.params + 4 * a.params + a.act_bytes_per_token * bt
        print("\n| threads | GEMM ms (at gemm-eff) | memory-bound ms | bandwidth used GB/s | memory-bound share |")
        print("|---:|---:|---:|---:|---:|")
        for n in a.threads:
            g = flops / (n * a.core_gflops * a.gemm_eff * 1e9) * 1e3
            bw = min(n * a.core_gbs, a.socket_gbs)
            m = mem / (bw * 1e9) * 1e3
            print(f"| {n} | {g:.1f} | {m:.1f} | {bw:.0f} | {100 * m / (g + m):.0f} % |")


if __name__ == "__main__":
    main()
