# torch_gpt2.py — a plain-PyTorch GPT-2 (no `transformers`) used as the numerical reference for
# gptc: it makes the test fixture (tools/make_torch_fixture.py) and the PyTorch side of the
# training benchmark (bench/torch_train_bench.py). Parameter names and layouts follow Hugging
# Face GPT-2 without the "transformer." prefix (wte.weight, h.0.attn.c_attn.weight [C,3C], ...;
# the Conv1D weights are stored [in, out] and applied as y = x @ W + b). Also here: the AdamW
# builder with gptc's weight-decay groups and a small self-written safetensors writer/reader.
import json
import math
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

LN_EPS = 1e-5


class Conv1D(nn.Module):
    """HF GPT-2 Conv1D: weight [in, out], y = x @ W + b."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(*x.shape[:-1], -1)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


# gptc's --gelu forms: tanh (GPT-2's, HF "gelu_new"), erf (exact, torch's nn.GELU(approximate="none"),
# HF "gelu") and sigmoid (x sigmoid(1.702 x), HF "quick_gelu").
GELU_FORMS = {
    "tanh": gelu_tanh,
    "erf": nn.GELU(approximate="none"),
    "sigmoid": lambda x: x * torch.sigmoid(1.702 * x),
}


class Attention(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        assert C % NH == 0
        self.C, self.NH = C, NH
        self.c_attn = Conv1D(C, 3 * C)
        self.c_proj = Conv1D(C, C)

    def forward(self, x):
        B, T, C = x.shape
        NH, HS = self.NH, C // self.NH
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, NH, HS).transpose(1, 2)  # [B, NH, T, HS]
        k = k.view(B, T, NH, HS).transpose(1, 2)
        v = v.view(B, T, NH, HS).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HS))  # [B, NH, T, T]
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v  # [B, NH, T, HS]
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, C, gelu="tanh"):
        super().__init__()
        self.c_fc = Conv1D(C, 4 * C)
        self.c_proj = Conv1D(4 * C, C)
        self.gelu = GELU_FORMS[gelu]

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, C, NH, gelu="tanh"):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C, eps=LN_EPS)
        self.attn = Attention(C, NH)
        self.ln_2 = nn.LayerNorm(C, eps=LN_EPS)
        self.mlp = MLP(C, gelu)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT2(nn.Module):
    def __init__(self, layers, heads, channels, context, vocab, gelu="tanh"):
        super().__init__()
        self.layers, self.heads, self.channels = layers, heads, channels
        self.context, self.vocab, self.gelu = context, vocab, gelu
        self.wte = nn.Embedding(vocab, channels)
        self.wpe = nn.Embedding(context, channels)
        self.h = nn.ModuleList([Block(channels, heads, gelu) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(channels, eps=LN_EPS)

    def forward(self, idx, targets=None):
        """idx [B,T] int64 -> logits [B,T,V]; with targets also the mean cross-entropy."""
        B, T = idx.shape
        assert T <= self.context, f"sequence {T} longer than context {self.context}"
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)[None]
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied output projection
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss


def is_decayed(name, p):
    """Weight decay goes to the 2-D weights: wte, wpe, c_attn.weight, c_proj.weight, c_fc.weight."""
    decayed = name in ("wte.weight", "wpe.weight") or name.endswith(
        (".c_attn.weight", ".c_proj.weight", ".c_fc.weight"))
    assert decayed == (p.dim() >= 2), name
    return decayed


def init_weights(model, generator):
    """gptc's reference init, in named_parameters() order: weights and biases N(0, 0.02),
    LayerNorm weights 1 + N(0, 0.1), LayerNorm biases N(0, 0.02). Generated in float32."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            is_ln = ".ln_" in "." + name
            if is_ln and name.endswith(".weight"):
                v = 1.0 + 0.1 * torch.randn(p.shape, generator=generator, dtype=torch.float32)
            else:
                v = 0.02 * torch.randn(p.shape, generator=generator, dtype=torch.float32)
            p.copy_(v)


def make_adamw(model, lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if is_decayed(name, p) else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)


# ---- safetensors, written and read by hand (Debian has no `safetensors` module)

_DTYPES = {  # safetensors name -> numpy little-endian dtype
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
    "I16": "<i2", "I8": "i1", "U8": "u1", "U16": "<u2", "BOOL": "?",
}
_NP_TO_ST = {np.dtype(v).str: k for k, v in _DTYPES.items()}


def _to_numpy(t):
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu().numpy()
    return np.asarray(t)


def save_safetensors(path, tensors, metadata=None):
    """tensors: ordered {name: numpy array or torch tensor}; written in that order, back to back.
    The dtype is the array's own (convert before calling). metadata: {str: str}."""
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        a = _to_numpy(t)
        a = np.ascontiguousarray(a.astype(a.dtype.newbyteorder("<"), copy=False))
        st = _NP_TO_ST.get(a.dtype.str)
        if st is None:
            raise ValueError(f"{name}: unsupported dtype {a.dtype}")
        b = a.tobytes()
        header[name] = {"dtype": st, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError("safetensors metadata must map str to str")
        header = {"__metadata__": dict(metadata), **header}
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((-len(hb)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    """Returns ({name: numpy array}, metadata dict), checking the layout strictly."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError("header length past end of file")
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    body = data[8 + n:]
    out, spans = {}, []
    for name, e in header.items():
        dt = np.dtype(_DTYPES[e["dtype"]])
        b, end = e["data_offsets"]
        count = int(np.prod(e["shape"], dtype=np.int64))
        if end - b != count * dt.itemsize or not 0 <= b <= end <= len(body):
            raise ValueError(f"{name}: bad data_offsets {e['data_offsets']}")
        out[name] = np.frombuffer(body, dtype=dt, count=count, offset=b).reshape(e["shape"])
        spans.append((b, end))
    pos = 0
    for b, end in sorted(spans):
        if b != pos:
            raise ValueError("tensor data has a gap or an overlap")
        pos = end
    if pos != len(body):
        raise ValueError("trailing bytes after the tensor data")
    return out, meta
