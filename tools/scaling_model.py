#!/usr/bin/env python3
"""scaling_model.py — the cost model of data-parallel gptc training in docs/scaling.md: bucketed ring
allreduce of the fp32 gradients (latency alpha per message, bandwidth BW per link), overlapped with the
backward pass, and ZeRO-1 (reduce-scatter + all-gather). Plain python3, no dependencies.

  python3 tools/scaling_model.py            # the Markdown tables of docs/scaling.md, on stdout
  python3 tools/scaling_model.py --update docs/scaling.md
                                            # rewrites the tables between the BEGIN/END markers there
  python3 tools/scaling_model.py --predict --params P --ranks N --bucket-mb B --alpha-us A --bw-gbps G
                                            # one prediction (used for the 2-rank check)

Model (see docs/scaling.md for the assumptions):
  ring allreduce of s bytes on N ranks:   t(s) = 2(N-1) alpha + 2(N-1)/N * s / BW
  reduce-scatter or all-gather:           half of that each: (N-1) alpha + (N-1)/N * s / BW
  buckets: ceil(4 P / bucket) messages; bucket i can start once the backward has produced its bytes
  (gradients appear at a uniform rate over the backward) and the previous bucket is done.
"""
import argparse
import math

MB = 1e6  # bucket sizes and gradient sizes are in decimal megabytes


def gpt2_params(layers, channels, vocab=50257, context=1024):
    """Parameter count as gptc_model_num_params counts it (tied embedding, unpadded vocab)."""
    c = channels
    per_layer = 2 * c + c * 3 * c + 3 * c + c * c + c + 2 * c + c * 4 * c + 4 * c + 4 * c * c + c
    return vocab * c + context * c + layers * per_layer + 2 * c


def flops_per_token(layers, channels, seq, vocab=50257, context=1024):
    """gptc_model_flops_per_token: 6 x (parameters but the position table) + 12 L C T."""
    n = gpt2_params(layers, channels, vocab, context) - context * channels
    return 6.0 * n + 12.0 * layers * channels * seq


MODELS = {
    "GPT-2 124M": dict(layers=12, channels=768),
    "GPT-2 1.5B": dict(layers=48, channels=1600),
}
NETWORKS = {
    "25 Gb/s Ethernet (TCP), alpha = 20 us": dict(alpha=20e-6, bw=25e9 / 8),
    "100 Gb/s InfiniBand (EDR), alpha = 2 us": dict(alpha=2e-6, bw=100e9 / 8),
}
RANKS = [8, 16, 64, 256, 1024]
BUCKETS_MB = [1, 25, 100]

# Measured per-rank compute for GPT-2 124M, fp32, B=4, T=256 on this machine's 2 cores
# (docs/performance.md#gpt-2-124m-training-against-pytorch-fp32, `sh bench/train_e2e.sh`: 222.7 and
# 236.9 tokens/s in two runs, mean 229.8): 1024 / 229.8 s.
SEQ, BATCH = 256, 4
T124_MEASURED = BATCH * SEQ / 229.8
FWD_SHARE, OPT_SHARE = 1.0 / 3.0, 0.039  # forward = 1/3 of forward+backward; AdamW 3.9 % of a step (docs/performance.md#where-a-t64-step-goes)


def allreduce_time(s, n, alpha, bw):
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * s / bw


def half_time(s, n, alpha, bw):
    """reduce-scatter or all-gather of s bytes (each rank ends with / starts from s/N)"""
    return (n - 1) * alpha + (n - 1) / n * s / bw


def buckets(total_bytes, bucket_bytes):
    k = max(1, math.ceil(total_bytes / bucket_bytes))
    sizes = [bucket_bytes] * (k - 1) + [total_bytes - bucket_bytes * (k - 1)]
    return sizes


def embedding_bytes(layers, channels, vocab=50257, context=1024):
    """The token and position tables' gradients (vocab padded to 64, as gptc stores wte): gptc's
    arena starts with them, so they form the last bucket, and the backward finishes them last (the
    tied wte's gradient is complete only after the embedding's backward)."""
    vpad = (vocab + 63) // 64 * 64
    return 4.0 * (vpad + context) * channels


def step(params, n, bucket_bytes, alpha, bw, compute, zero1=False, tail_bytes=0.0):
    """Predicted step time and its parts for one rank.

    compute = forward + backward + optimizer of one rank's micro-batch (no communication).
    tail_bytes: a last bucket (the embeddings) that becomes ready only when the backward ends; the
    other bytes are produced at a uniform rate over the backward, in buckets of bucket_bytes.
    Returns dict: comm (total communication time, none hidden), step, exposed (step - compute).
    """
    total = 4.0 * params
    body = total - tail_bytes
    t_opt = OPT_SHARE * compute
    t_fb = compute - t_opt
    t_fwd = FWD_SHARE * t_fb
    t_bwd = t_fb - t_fwd
    one = half_time if zero1 else allreduce_time
    plan = [(s, None) for s in buckets(body, bucket_bytes)] + ([(tail_bytes, t_fb)] if tail_bytes > 0 else [])
    done = 0.0  # bytes produced so far
    end = 0.0  # when the channel is free
    comm = 0.0
    for s, ready in plan:
        done += s
        if ready is None:
            ready = t_fwd + t_bwd * done / body
        t = one(s, n, alpha, bw)
        end = max(end, ready) + t
        comm += t
    after_bwd = max(t_fb, end)
    if zero1:
        # optimizer on this rank's 1/N of the parameters, then the all-gather of the updated
        # parameters (bucketed the same way), which nothing overlaps in this simple schedule
        ag = sum(half_time(s, n, alpha, bw) for s, _ in plan)
        comm += ag
        st = after_bwd + t_opt / n + ag
    else:
        st = after_bwd + t_opt
    return dict(comm=comm, step=st, exposed=st - compute, nbuckets=len(plan))


def fmt_s(t):
    if t >= 100:
        return "%.0f s" % t
    if t >= 1:
        return "%.2f s" % t
    return "%.0f ms" % (t * 1e3) if t >= 0.01 else "%.1f ms" % (t * 1e3)


def tables():
    out = []
    p = lambda *a: out.append(" ".join(str(x) for x in a))
    f124 = flops_per_token(**MODELS["GPT-2 124M"], seq=SEQ)
    p("<!-- generated by `python3 tools/scaling_model.py`; edit the script, not these tables -->")
    p()
    p("Inputs: per-rank micro-batch B=%d, T=%d (fp32 gradients, 4 bytes per parameter); compute per step" % (BATCH, SEQ))
    p("scaled from the measured GPT-2 124M step on this machine's 2 cores (%.2f s) by FLOPs per token;" % T124_MEASURED)
    p("\"fast node\" = the same rank %d× faster (e.g. a 64-core node at this machine's per-core speed)." % 32)
    p("forward : backward = 1 : 2 of forward+backward; AdamW = %.1f %% of the step (docs/performance.md#where-a-t64-step-goes)." % (OPT_SHARE * 100))
    p("The embedding tables (last bucket, ready only at the end of the backward) are sent as one more message.")
    p()
    p("| model | parameters | gradient bytes | of which embeddings | FLOPs/token (T=%d) | compute/step, 2 cores | compute/step, fast node |" % SEQ)
    p("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, m in MODELS.items():
        P = gpt2_params(**m)
        c = T124_MEASURED * flops_per_token(**m, seq=SEQ) / f124
        p("| %s | %s | %.0f MB | %.0f MB | %.3g G | %s | %s |" % (name, "{:,}".format(P), 4 * P / MB, embedding_bytes(**m) / MB,
                                                        flops_per_token(**m, seq=SEQ) / 1e9,
                                                        fmt_s(c), fmt_s(c / 32)))
    p()
    for name, m in MODELS.items():
        P = gpt2_params(**m)
        tail = embedding_bytes(**m)
        c2 = T124_MEASURED * flops_per_token(**m, seq=SEQ) / f124
        for net, nw in NETWORKS.items():
            a, bw = nw["alpha"], nw["bw"]
            p("#### %s — %s, %.2f GB/s per link" % (name, net, bw / 1e9))
            p()
            p("Allreduce time per step (sum over buckets, nothing hidden), and the predicted step time with the")
            p("buckets overlapped with the backward, for a rank computing %s per step (2 cores) and %s (fast node)." % (fmt_s(c2), fmt_s(c2 / 32)))
            p()
            hdr = "| N | " + " | ".join("allreduce %d MB" % b for b in BUCKETS_MB)
            hdr += " | " + " | ".join("step %d MB" % b for b in BUCKETS_MB) + " | ZeRO-1 25 MB"
            hdr += " | " + " | ".join("fast: step %d MB" % b for b in BUCKETS_MB) + " | fast: ZeRO-1 25 MB"
            hdr += " | fast: efficiency 25 MB |"
            p(hdr)
            p("| ---: " * (1 + 3 * len(BUCKETS_MB) + 3) + "|")
            for n in RANKS:
                row = ["%d" % n]
                st = lambda b, c, z=False: step(P, n, b * MB, a, bw, c, zero1=z, tail_bytes=tail)
                row += [fmt_s(st(b, c2)["comm"]) for b in BUCKETS_MB]
                row += [fmt_s(st(b, c2)["step"]) for b in BUCKETS_MB]
                row += [fmt_s(st(25, c2, True)["step"])]
                row += [fmt_s(st(b, c2 / 32)["step"]) for b in BUCKETS_MB]
                row += [fmt_s(st(25, c2 / 32, True)["step"])]
                row += ["%.0f %%" % (100 * (c2 / 32) / st(25, c2 / 32)["step"])]
                p("| " + " | ".join(row) + " |")
            p()
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--predict", action="store_true", help="one prediction instead of the tables")
    ap.add_argument("--update", metavar="MD", help="replace the tables between the markers in this Markdown file")
    ap.add_argument("--params", type=float, help="parameters (gradient bytes = 4x)")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--bucket-mb", type=float, default=25)
    ap.add_argument("--calls", type=int, help="allreduces per step instead of --bucket-mb (gptc's buckets are whole tensors, so its count is what `gptc train` reports)")
    ap.add_argument("--alpha-us", type=float)
    ap.add_argument("--bw-gbps", type=float, help="link bandwidth in GB/s (bytes)")
    ap.add_argument("--compute-s", type=float, default=0.0, help="per-rank compute per step (for the overlap)")
    ap.add_argument("--zero", type=int, default=0)
    ap.add_argument("--tail-mb", type=float, default=0.0, help="a last bucket of this many MB ready only at the end of the backward (gptc: the embeddings)")
    a = ap.parse_args()
    if a.update:
        begin, end = "<!-- BEGIN scaling_model tables -->", "<!-- END scaling_model tables -->"
        with open(a.update) as f:
            text = f.read()
        i, j = text.find(begin), text.find(end)
        if i < 0 or j < i:
            raise SystemExit("%s: no %s ... %s markers" % (a.update, begin, end))
        text = text[: i + len(begin)] + "\n" + tables() + "\n" + text[j:]
        with open(a.update, "w") as f:
            f.write(text)
        return
    if not a.predict:
        print(tables())
        return
    if a.params is None or a.alpha_us is None or a.bw_gbps is None:
        ap.error("--predict needs --params, --alpha-us and --bw-gbps")
    tail = a.tail_mb * MB
    bucket = (4.0 * a.params - tail) / (a.calls - (1 if tail else 0)) if a.calls else a.bucket_mb * MB
    r = step(a.params, a.ranks, bucket, a.alpha_us * 1e-6, a.bw_gbps * 1e9, a.compute_s, zero1=bool(a.zero), tail_bytes=tail)
    print("buckets %d, communication %.3f ms per step, predicted step %.3f ms (exposed %.3f ms)"
          % (r["nbuckets"], r["comm"] * 1e3, r["step"] * 1e3, r["exposed"] * 1e3))


if __name__ == "__main__":
    main()
