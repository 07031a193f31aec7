#!/usr/bin/python3
# make_interop_fixtures.py — writes the fixtures of tests/test_interop.c: one tiny random GPT-2
# (tools/torch_gpt2.py) saved in the formats other projects use, and torch's logits on it:
#   hf/config.json, hf/model.safetensors         Hugging Face GPT-2: names without "transformer.",
#                                                 Conv1D weights [in, out], tensors in name order
#                                                 (as the safetensors library writes them), F32
#   hf_prefixed/...                               the same with "transformer." names, lm_head.weight
#                                                 (tied: equal to wte) and the attn.bias /
#                                                 attn.masked_bias buffers older exports carry
#   hf_f16/...                                    the same as hf/, tensors in F16
#   llmc_fp32.bin, llmc_bf16.bin                  llm.c's checkpoint: 256 int32 header (magic 20240326,
#                                                 version 3 fp32 / 5 bf16, maxT, V, L, NH, C, Vp),
#                                                 then the parameters in llm.c's order, matrices
#                                                 [out, in], wte padded with zero rows to Vp (a
#                                                 multiple of 128)
#   reference.safetensors                         inputs (T int32), logits (T,V) from the fp32
#                                                 weights, logits_bf16 and logits_f16 from the rounded ones,
#                                                 computed in float64
# Usage: /usr/bin/python3 tools/make_interop_fixtures.py [OUT_DIR] (default tests/fixtures/interop)
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from torch_gpt2 import GPT2, init_weights, save_safetensors  # noqa: E402

SEED = 4242
CFG = dict(layers=2, heads=4, channels=64, context=32, vocab=130)  # gptc pads V to 192, llm.c to 256
T = 20
LLMC_MAGIC = 20240326
LAYER_TENSORS = [  # llm.c's per-layer order; True: a matrix, stored [out, in] by llm.c
    ("ln_1.weight", False), ("ln_1.bias", False), ("attn.c_attn.weight", True), ("attn.c_attn.bias", False),
    ("attn.c_proj.weight", True), ("attn.c_proj.bias", False), ("ln_2.weight", False), ("ln_2.bias", False),
    ("mlp.c_fc.weight", True), ("mlp.c_fc.bias", False), ("mlp.c_proj.weight", True), ("mlp.c_proj.bias", False),
]


def hf_config(cfg):
    return {
        "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
        "bos_token_id": cfg["vocab"] - 1, "embd_pdrop": 0.1, "eos_token_id": cfg["vocab"] - 1,
        "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2",
        "n_ctx": cfg["context"], "n_embd": cfg["channels"], "n_head": cfg["heads"], "n_inner": None,
        "n_layer": cfg["layers"], "n_positions": cfg["context"], "resid_pdrop": 0.1,
        "summary_activation": None, "summary_first_dropout": 0.1, "summary_proj_to_labels": True,
        "summary_type": "cls_index", "summary_use_proj": True, "vocab_size": cfg["vocab"],
    }


def write_hf(folder, params, prefixed, dtype=np.float32):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(hf_config(CFG), f, indent=2)
    tensors = {}
    for name, a in params.items():
        tensors[("transformer." if prefixed else "") + name] = a.astype(dtype)
    if prefixed:
        tensors["lm_head.weight"] = params["wte.weight"]
        ctx = CFG["context"]
        for l in range(CFG["layers"]):
            tensors[f"transformer.h.{l}.attn.bias"] = np.tril(np.ones((ctx, ctx), np.float32))[None, None]
            tensors[f"transformer.h.{l}.attn.masked_bias"] = np.array(-1e4, np.float32)
    ordered = {k: tensors[k] for k in sorted(tensors)}
    save_safetensors(os.path.join(folder, "model.safetensors"), ordered, {"format": "pt"})


def to_bf16_bits(a):
    """float32 array -> uint16 bfloat16 bits, rounded to nearest even (torch's conversion)."""
    return torch.from_numpy(np.ascontiguousarray(a)).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def write_llmc(path, params, bf16):
    L, C, V, maxT = CFG["layers"], CFG["channels"], CFG["vocab"], CFG["context"]
    Vp = (V + 127) // 128 * 128
    header = np.zeros(256, np.int32)
    header[:8] = [LLMC_MAGIC, 5 if bf16 else 3, maxT, V, L, CFG["heads"], C, Vp]
    wte = np.zeros((Vp, C), np.float32)
    wte[:V] = params["wte.weight"]
    parts = [wte, params["wpe.weight"]]
    for name, is_matrix in LAYER_TENSORS:
        for l in range(L):
            a = params[f"h.{l}.{name}"]
            parts.append(a.T if is_matrix else a)  # Conv1D [in, out] -> nn.Linear [out, in]
    parts += [params["ln_f.weight"], params["ln_f.bias"]]
    with open(path, "wb") as f:
        f.write(header.astype("<i4").tobytes())
        for a in parts:
            a = np.ascontiguousarray(a, dtype=np.float32)
            f.write(to_bf16_bits(a).astype("<u2").tobytes() if bf16 else a.astype("<f4").tobytes())


def logits_of(params, inputs):
    model = GPT2(**CFG).double()
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(torch.from_numpy(params[n]).double())
        return model(torch.from_numpy(inputs.astype(np.int64))[None])[0].float().numpy()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/interop"
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    model = GPT2(**CFG)
    init_weights(model, gen)
    params = {n: p.detach().float().numpy().copy() for n, p in model.named_parameters()}
    inputs = torch.randint(0, CFG["vocab"], (T,), generator=gen, dtype=torch.int64).numpy().astype(np.int32)
    rounded = {n: torch.from_numpy(a).to(torch.bfloat16).float().numpy() for n, a in params.items()}

    write_hf(os.path.join(out, "hf"), params, prefixed=False)
    write_hf(os.path.join(out, "hf_prefixed"), params, prefixed=True)
    write_hf(os.path.join(out, "hf_f16"), params, prefixed=False, dtype=np.float16)
    write_llmc(os.path.join(out, "llmc_fp32.bin"), params, bf16=False)
    write_llmc(os.path.join(out, "llmc_bf16.bin"), params, bf16=True)
    halved = {n: a.astype(np.float16).astype(np.float32) for n, a in params.items()}
    ref = {"inputs": inputs, "logits": logits_of(params, inputs), "logits_bf16": logits_of(rounded, inputs),
           "logits_f16": logits_of(halved, inputs)}
    meta = {k: str(v) for k, v in CFG.items()}
    save_safetensors(os.path.join(out, "reference.safetensors"), ref, meta)

    # self-check: the llm.c file has the size its header implies
    n = sum(a.size for a in params.values()) + ((CFG["vocab"] + 127) // 128 * 128 - CFG["vocab"]) * CFG["channels"]
    assert os.path.getsize(os.path.join(out, "llmc_fp32.bin")) == 1024 + 4 * n
    assert os.path.getsize(os.path.join(out, "llmc_bf16.bin")) == 1024 + 2 * n
    print(f"wrote {out}: {n} llm.c parameters, logits |max| {np.abs(ref['logits']).max():.4f}")


if __name__ == "__main__":
    main()
