#!/usr/bin/python3
# torch_generate_bench.py — times PyTorch generating with GPT-2 124M (12 layers, 12 heads, 768 channels,
# context 1024, vocab 50257, random init from tools/torch_gpt2.py) on the CPU the way Hugging Face's
# generate does it, with a KV cache: the prompt in one forward (prefill; keys and values of every
# position kept), then one incremental forward per new token over the cached keys. Caches are
# preallocated (max length) and written in place (cheaper than HF's concatenation each step); the
# prompt is prefilled once and its cache copied to --samples rows, which then step together (batch
# = samples); greedy choice (argmax of the last row's logits, which alone go through the classifier), or
# with --temperature T > 0 a draw from softmax(logits / T) restricted to the top-p nucleus (--top-p, as
# Hugging Face's TopPLogitsWarper: the sorted probabilities' cumulative sum) by torch.multinomial.
# fp32, or bf16 with the whole model cast to bfloat16 (weights, activations and caches: torch's own
# bf16 inference). The peer of bench/generate.sh, run there through bench/lib.sh's peer_run (tcmalloc,
# OpenBLAS's OpenMP build and AVX-512 kernels, pinned threads); it prints the configuration it got
# (torch_train_bench.py's check) and then exactly one summary line:
#   torch: fp32 samples=1 threads=2 temperature=0 top_p=1 | prefill 512 tokens 0.812 s, 630.5 tokens/s | decode 127 steps 4.100 s, 31.0 tokens/s, 32.28 ms/step
import argparse
import math
import os
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tools"))
sys.path.insert(0, here)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from torch_gpt2 import GPT2, init_weights  # noqa: E402
from torch_train_bench import CFG, configuration  # noqa: E402


def forward_cached(model, idx, kc, vc, pos):
    """idx [B,T] at positions pos..pos+T-1; kc, vc [L][B,NH,maxT,HS] written there; returns the last
    position's logits [B,V]."""
    B, T = idx.shape
    C, NH = model.channels, model.heads
    HS = C // NH
    x = model.wte(idx) + model.wpe(torch.arange(pos, pos + T))[None]
    mask = None
    if T > 1:  # causal within the new rows, everything before them visible
        mask = torch.ones(T, pos + T, dtype=torch.bool).tril(diagonal=pos)
    for l, blk in enumerate(model.h):
        a = blk.attn
        q, k, v = a.c_attn(blk.ln_1(x)).split(C, dim=2)
        q = q.view(B, T, NH, HS).transpose(1, 2)
        kc[l][:, :, pos:pos + T] = k.view(B, T, NH, HS).transpose(1, 2)
        vc[l][:, :, pos:pos + T] = v.view(B, T, NH, HS).transpose(1, 2)
        K, V = kc[l][:, :, :pos + T], vc[l][:, :, :pos + T]
        att = (q @ K.transpose(-2, -1)) * (1.0 / math.sqrt(HS))
        if mask is not None:
            att = att.masked_fill(~mask, float("-inf"))
        y = (F.softmax(att, dim=-1) @ V).transpose(1, 2).reshape(B, T, C)
        x = x + a.c_proj(y)
        x = x + blk.mlp(blk.ln_2(x))
    return model.ln_f(x[:, -1]) @ model.wte.weight.t()


def draw(logits, temperature, top_p, gen):
    """Each row's next token: greedy (temperature 0), or sampled from the top-p nucleus of softmax(logits / T)."""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1:
        sp, si = torch.sort(probs, dim=-1, descending=True)
        keep = (torch.cumsum(sp, dim=-1) - sp) < top_p  # the shortest run whose probability reaches top_p
        sp = torch.where(keep, sp, torch.zeros_like(sp))
        return si.gather(-1, torch.multinomial(sp, 1, generator=gen)).squeeze(-1)
    return torch.multinomial(probs, 1, generator=gen).squeeze(-1)


def generate(model, prompt, new, samples, dtype, temperature=0.0, top_p=1.0, gen=None):
    """Prefill + new-1 steps; returns (prefill seconds, decode seconds, tokens)."""
    L, NH, C, T = model.layers, model.heads, model.channels, model.context
    shape = (1, NH, T, C // NH)
    kc = [torch.empty(shape, dtype=dtype) for _ in range(L)]
    vc = [torch.empty(shape, dtype=dtype) for _ in range(L)]
    t0 = time.perf_counter()
    logits = forward_cached(model, prompt[None], kc, vc, 0)
    t1 = time.perf_counter()
    n = prompt.numel()
    kc = [c.expand(samples, -1, -1, -1).clone() for c in kc]  # the prompt's cache for every sample
    vc = [c.expand(samples, -1, -1, -1).clone() for c in vc]
    logits = logits.expand(samples, -1)
    out = []
    for i in range(new):
        nxt = draw(logits, temperature, top_p, gen)
        out.append(nxt)
        if i + 1 < new:
            logits = forward_cached(model, nxt[:, None], kc, vc, n + i)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, out


def main():
    ap = argparse.ArgumentParser(description="Times GPT-2 124M generation with a KV cache in PyTorch (CPU).")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--tokens", type=int, default=128, help="new tokens per sample")
    ap.add_argument("--samples", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--temperature", type=float, default=0.0, help="0: greedy")
    ap.add_argument("--top-p", type=float, default=1.0)
    a = ap.parse_args()
    if a.prompt_tokens < 1 or a.tokens < 2 or a.samples < 1 or a.prompt_tokens + a.tokens > CFG["context"]:
        ap.error("need 1 <= prompt-tokens, 2 <= tokens, prompt-tokens + tokens <= 1024, samples >= 1")
    if not (a.temperature >= 0 and 0 < a.top_p <= 1):
        ap.error("need temperature >= 0 and 0 < top-p <= 1")
    torch.set_num_threads(a.threads)
    torch.ones(64, 64) @ torch.ones(64, 64)  # loads and starts the BLAS before it is inspected
    err = configuration(a.threads)
    if err:
        print(f"torch_generate_bench: {err}", file=sys.stderr)
        sys.exit(1)
    gen = torch.Generator().manual_seed(a.seed)
    model = GPT2(**CFG)
    init_weights(model, gen)
    model.eval()
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    model = model.to(dtype)
    prompt = torch.randint(0, CFG["vocab"], (a.prompt_tokens,), generator=gen)
    with torch.inference_mode():
        generate(model, prompt[:32], 4, a.samples, dtype, a.temperature, a.top_p, gen)  # warm-up: allocator, BLAS threads
        pre, dec, _ = generate(model, prompt, a.tokens, a.samples, dtype, a.temperature, a.top_p, gen)
    steps = a.tokens - 1
    print(f"torch: {a.dtype} samples={a.samples} threads={a.threads} temperature={a.temperature:g} top_p={a.top_p:g} | prefill {a.prompt_tokens} tokens {pre:.3f} s, "
          f"{a.prompt_tokens / pre:.1f} tokens/s | decode {steps} steps {dec:.3f} s, "
          f"{steps * a.samples / dec:.1f} tokens/s, {dec * 1e3 / steps:.2f} ms/step", flush=True)


if __name__ == "__main__":
    main()
