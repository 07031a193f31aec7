#!/usr/bin/python3
# make_hellaswag_fixture.py — writes the PyTorch reference for gptc's HellaSwag-format multiple choice
# (src/train/hellaswag.h): a tiny byte-level GPT-2 (tools/torch_gpt2.py, vocabulary 257: the 256 bytes
# and end-of-text, gptc's byte tokenizer) with fixed-seed float32 weights, and, computed in float64,
# every candidate's summed loss over its ending's tokens for each item of the hand-written
# tests/fixtures/hellaswag/tiny.jsonl, with the accuracies by sum (acc) and per token (acc_norm).
# The scoring is the one hellaswag.h states: tokens of ctx, then of " " + ending; a row longer than
# context + 1 keeps its last context tokens (the context is short enough here that some rows do).
# Usage: /usr/bin/python3 tools/make_hellaswag_fixture.py [ITEMS.jsonl [OUT.safetensors]]
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from torch_gpt2 import GPT2, init_weights, load_safetensors, save_safetensors  # noqa: E402

SEED = 4242
CFG = dict(layers=2, heads=2, channels=32, context=100, vocab=257)
ITEMS = "tests/fixtures/hellaswag/tiny.jsonl"
OUT = "tests/fixtures/hellaswag/tiny_torch.safetensors"
MIN_GAP = 1e-3  # the best candidate beats the runner-up by more than this (nats), so fp32 agrees on it


def tokens(text):
    return list(text.encode("utf-8"))  # gptc's byte tokenizer: id = byte value


def score(model, item, context):
    """Summed loss and token count of each candidate's ending, in float64."""
    ctx = tokens(item["ctx"])
    sums, counts = [], []
    for ending in item["endings"]:
        end = tokens(" " + ending)
        keep = min(len(ctx), context + 1 - len(end))
        assert keep >= 1, "an ending too long for the context"
        row = ctx[len(ctx) - keep:] + end
        x = torch.tensor([row[:-1]], dtype=torch.int64)
        logp = F.log_softmax(model(x)[0], dim=-1)  # [n-1, V]
        # ending token j sits at row position keep + j, predicted at input position keep + j - 1
        s = -sum(float(logp[keep + j - 1, end[j]]) for j in range(len(end)))
        sums.append(s)
        counts.append(len(end))
    return sums, counts


def main():
    items_path = sys.argv[1] if len(sys.argv) > 1 else ITEMS
    out = sys.argv[2] if len(sys.argv) > 2 else OUT
    with open(items_path, encoding="utf-8") as f:
        items = [json.loads(line) for line in f if line.strip()]
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    model = GPT2(**CFG)
    init_weights(model, gen)  # float32 draws
    params = {n: p.detach().to(torch.float32).numpy().copy() for n, p in model.named_parameters()}
    model.double().eval()

    nmax = max(len(it["endings"]) for it in items)
    sums = np.full((len(items), nmax), np.nan)
    counts = np.zeros((len(items), nmax), dtype=np.int32)
    correct = correct_norm = truncated = 0
    with torch.no_grad():
        for i, it in enumerate(items):
            s, c = score(model, it, CFG["context"])
            sums[i, :len(s)], counts[i, :len(c)] = s, c
            norm = [a / b for a, b in zip(s, c)]
            for v in (s, norm):
                best, second = sorted(v)[:2]
                if second - best <= MIN_GAP:
                    sys.exit(f"make_hellaswag_fixture: item {i + 1}: a near tie ({best} vs {second}); change SEED")
            correct += int(np.argmin(s)) == it["label"]
            correct_norm += int(np.argmin(norm)) == it["label"]
            truncated += any(len(tokens(it["ctx"])) + n > CFG["context"] + 1 for n in c)
    print(f"{len(items)} items ({truncated} with a truncated context): acc {correct}/{len(items)}, "
          f"acc_norm {correct_norm}/{len(items)}")
    if not 0 < truncated < len(items):
        sys.exit("make_hellaswag_fixture: the context should truncate some items and not others; change CFG['context']")

    tensors = {"param." + n: a for n, a in params.items()}
    tensors["sum_loss"] = sums
    tensors["ntok"] = counts
    meta = {k: str(v) for k, v in CFG.items()}
    meta.update(items=str(len(items)), correct=str(correct), correct_norm=str(correct_norm),
                torch_version=torch.__version__, generator="tools/make_hellaswag_fixture.py")
    tmp = out + ".tmp"
    save_safetensors(tmp, tensors, meta)
    os.replace(tmp, out)
    got, got_meta = load_safetensors(out)
    assert got_meta == meta and all(np.array_equal(got[k], v, equal_nan=True) for k, v in tensors.items())
    print(f"wrote {out} ({os.path.getsize(out)} bytes)")


if __name__ == "__main__":
    main()
