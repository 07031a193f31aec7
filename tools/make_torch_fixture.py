#!/usr/bin/python3
# make_torch_fixture.py — writes the PyTorch reference fixture gptc's tests compare against: a tiny
# GPT-2 (tools/torch_gpt2.py) with fixed-seed weights, one batch, the first forward (logits, loss)
# and backward (gradients), then 3 AdamW steps with gradient clipping on that batch (losses, pre-clip
# norms, final weights). Weights are drawn in float32 and stored as float32; the computation is done
# in float64 so the reference is accurate. Usage:
#   /usr/bin/python3 tools/make_torch_fixture.py [--gelu tanh|erf|sigmoid] [OUT.safetensors]
# The GELU form is gptc's --gelu (default tanh, GPT-2's; erf is torch's nn.GELU(approximate="none"))
# and is recorded in the metadata as "gelu". Default OUT: tests/fixtures/gpt2_tiny_torch.safetensors
# for tanh, tests/fixtures/gpt2_tiny_torch_<form>.safetensors otherwise. Ends with a self-check that
# re-reads the file.
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from torch_gpt2 import GELU_FORMS, GPT2, init_weights, load_safetensors, make_adamw, save_safetensors  # noqa: E402

SEED = 1337
CFG = dict(layers=2, heads=4, channels=48, context=16, vocab=67)
B, T = 3, 11
LR, BETA1, BETA2, EPS, WEIGHT_DECAY = 1e-3, 0.9, 0.95, 1e-8, 0.1
CLIP = 0.5  # below every pre-clip norm (checked below), so clipping is active on each step
STEPS = 3
DEFAULT_OUT = "tests/fixtures/gpt2_tiny_torch.safetensors"
# With the reference init the MLP pre-activations stay within ~0.3 of 0, where the GELU forms agree
# to ~1e-6, so a fixture for another form would pass with any of them. Its c_fc weights are scaled
# up (pre-activations over roughly +-3) until the tanh form misses its gradients by over
# DISCRIMINATE (checked below); the tanh fixture keeps the plain init.
FC_SCALE = {"tanh": 1.0, "erf": 10.0, "sigmoid": 10.0}
DISCRIMINATE = 5e-4  # 5x the tolerance of tests/test_torch_parity.c


def default_out(gelu):
    return DEFAULT_OUT if gelu == "tanh" else DEFAULT_OUT.replace(".safetensors", f"_{gelu}.safetensors")


def f32(t):
    return t.detach().to(torch.float32).cpu().numpy().copy()


def main():
    args = sys.argv[1:]
    gelu = "tanh"
    if args[:1] == ["--gelu"]:
        if len(args) < 2 or args[1] not in GELU_FORMS:
            sys.exit(f"make_torch_fixture: --gelu: expected one of {', '.join(GELU_FORMS)}")
        gelu, args = args[1], args[2:]
    out = args[0] if args else default_out(gelu)
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)

    model = GPT2(**CFG, gelu=gelu)
    init_weights(model, gen)  # float32 draws
    if FC_SCALE[gelu] != 1.0:
        with torch.no_grad():
            for n, p in model.named_parameters():
                if n.endswith(".mlp.c_fc.weight"):
                    p.mul_(FC_SCALE[gelu])
    names = [n for n, _ in model.named_parameters()]
    params0 = {n: f32(p) for n, p in model.named_parameters()}
    model.double()  # the reference computation runs in float64

    inputs = torch.randint(0, CFG["vocab"], (B, T), generator=gen, dtype=torch.int64)
    targets = torch.randint(0, CFG["vocab"], (B, T), generator=gen, dtype=torch.int64)

    # First forward and backward.
    logits, loss = model(inputs, targets)
    loss.backward()
    logits0, loss0 = f32(logits), f32(loss.reshape(1))
    grads0 = {n: f32(p.grad) for n, p in model.named_parameters()}
    print(f"initial loss {loss.item():.6f}")

    # Training steps on the same batch.
    opt = make_adamw(model, LR, betas=(BETA1, BETA2), eps=EPS, weight_decay=WEIGHT_DECAY)
    params = list(model.parameters())
    step_loss, grad_norm = [], []
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        _, loss = model(inputs, targets)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, CLIP)
        opt.step()
        step_loss.append(loss.item())
        grad_norm.append(float(norm))
        print(f"step {step + 1}: loss {loss.item():.6f}, grad norm {float(norm):.6f} (clip {CLIP})")
    if not all(n > CLIP for n in grad_norm):
        sys.exit(f"make_torch_fixture: clip {CLIP} is not below every grad norm {grad_norm}; lower it")

    tensors = {}
    for n in names:
        tensors["param." + n] = params0[n]
    tensors["inputs"] = inputs.to(torch.int32).numpy()
    tensors["targets"] = targets.to(torch.int32).numpy()
    tensors["logits"] = logits0
    tensors["loss"] = loss0
    for n in names:
        tensors["grad." + n] = grads0[n]
    tensors["step_loss"] = np.array(step_loss, dtype=np.float32)
    tensors["grad_norm"] = np.array(grad_norm, dtype=np.float32)
    for n, p in model.named_parameters():
        tensors["updated." + n] = f32(p)

    meta = {k: str(v) for k, v in CFG.items()}
    meta.update(batch=str(B), seq=str(T), lr=repr(LR), beta1=repr(BETA1), beta2=repr(BETA2),
                eps=repr(EPS), weight_decay=repr(WEIGHT_DECAY), clip=repr(CLIP),
                torch_version=torch.__version__, generator="tools/make_torch_fixture.py")
    if gelu != "tanh":  # the tanh fixture predates the keys; a reader takes their absence as tanh
        meta.update(gelu=gelu, c_fc_scale=repr(FC_SCALE[gelu]))

    d = os.path.dirname(out)
    if d:
        os.makedirs(d, exist_ok=True)
    tmp = out + ".tmp"
    save_safetensors(tmp, tensors, meta)
    os.replace(tmp, out)
    print(f"wrote {out} ({os.path.getsize(out)} bytes, {len(tensors)} tensors)")

    self_check(out, tensors, meta, gelu)


def self_check(path, tensors, meta, gelu):
    """Re-reads the file with our own reader: same names, dtypes, shapes, bytes and metadata; the
    stored float32 weights reproduce the stored logits and loss; and the updates moved the weights."""
    got, got_meta = load_safetensors(path)
    assert got_meta == meta, (got_meta, meta)
    assert list(got) == list(tensors), "tensor names or order differ"
    for n, a in tensors.items():
        g = got[n]
        assert g.dtype == a.dtype and g.shape == a.shape, n
        assert np.array_equal(g, a), n
    with open(path, "rb") as f:
        hlen = int.from_bytes(f.read(8), "little")
    assert hlen % 8 == 0

    model = GPT2(**CFG, gelu=gelu).double()
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(torch.from_numpy(got["param." + n].astype(np.float64)))
    inputs = torch.from_numpy(got["inputs"].astype(np.int64))
    targets = torch.from_numpy(got["targets"].astype(np.int64))
    logits, loss = model(inputs, targets)
    assert np.allclose(logits.detach().numpy(), got["logits"], rtol=1e-5, atol=1e-6)
    assert abs(loss.item() - float(got["loss"][0])) < 1e-6
    assert abs(float(got["step_loss"][0]) - float(got["loss"][0])) < 1e-6
    moved = max(float(np.abs(got["updated." + n] - got["param." + n]).max()) for n, _ in model.named_parameters())
    assert moved > 0.0
    if gelu != "tanh":
        # the fixture must tell its form from GPT-2's: the tanh form misses its gradients
        other = GPT2(**CFG, gelu="tanh").double()
        with torch.no_grad():
            for n, p in other.named_parameters():
                p.copy_(torch.from_numpy(got["param." + n].astype(np.float64)))
        _, loss = other(inputs, targets)
        loss.backward()
        miss = max(float(np.abs(p.grad.numpy() - got["grad." + n]).max() / np.abs(got["grad." + n]).max())
                   for n, p in other.named_parameters())
        if miss <= DISCRIMINATE:
            sys.exit(f"make_torch_fixture: the tanh form misses the {gelu} gradients by only {miss:.2e}; raise FC_SCALE")
        print(f"the tanh form misses the {gelu} gradients by {miss:.2e} (> {DISCRIMINATE:g})")
    print(f"self-check ok: {len(got)} tensors, {len(got_meta)} metadata keys, max weight change {moved:.3g}")


if __name__ == "__main__":
    main()
