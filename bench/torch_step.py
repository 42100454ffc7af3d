"""PyTorch baseline for bench/trainer.bench.ts: the emulation trainer's model and step in PyTorch on CPU.

Same shapes as the `tiny`/`small` presets (Llama-style: embedding, RMSNorm, causal attention with
RoPE, SwiGLU MLP, final RMSNorm, LM head over 256 bytes), mean cross-entropy, global-norm clipping
and AdamW (decay on matrices only), all fp32. At `mxfp4` every linear layer's three GEMMs see
operands fake-quantized to MXFP4 along their reduction dimension (Fprop: X and W along in-features,
Dgrad: dY and W along out-features, Wgrad: dY and X along tokens), nearest-even, no rotation, by a
custom autograd Function whose quantizer is bit-identical to src/mx (`--check in.f32 out.f32 rowLength`
compares it with src/mx's output; the trainer bench and test/mx/torch-fake-quant.test.ts run it).

One thread (torch.set_num_threads(1)) to match the single-threaded trainer. PyTorch's matrix
products go to the BLAS the dynamic linker finds as libblas.so.3; on Debian that is the reference
BLAS unless an optimized one is installed. To point torch at OpenBLAS the way a user would:
  sudo apt-get install libopenblas0-pthread   # Debian's alternatives then prefer it, or pick it with
  sudo update-alternatives --config libblas.so.3-x86_64-linux-gnu
or, without touching the system, LD_LIBRARY_PATH=/path/to/openblas-pthread (a directory holding
libblas.so.3; bench/trainer.bench.ts passes MXSCOPE_TORCH_BLAS_DIR through as that). MKL works the
same way (libmkl-rt registers as a libblas.so.3 alternative). The BLAS in use is printed.

Protocol (driven by the trainer bench): one JSON object per stdin line,
  {"preset": "tiny", "precision": "mxfp4", "steps": 10}
runs that many training steps on a model kept per (preset, precision) and answers one line
  {"seconds": wall, "cpu": process CPU seconds, "loss": last loss}.
"""
import json
import math
import os
import sys
import time

import torch

torch.set_num_threads(1)

SHAPES = {
    'tiny': dict(dim=64, layers=2, heads=4, hidden=192, seq_len=64, batch=8, lr=5e-3),
    'small': dict(dim=128, layers=4, heads=4, hidden=384, seq_len=128, batch=8, lr=3e-3),
}
VOCAB = 256
BLOCK = 32


def fake_quant_mxfp4(x):
    """MXFP4 fake-quant along the last dimension (a multiple of 32), nearest-even, as src/mx does it.

    Exact in float32: the shared scale 2^s is a power of two, so y = x·2^−s is exact (or underflows
    to ±0 exactly where the reference's sign rule gives +0), the E2M1 grid rounding is round-half-
    even on multiples of the binade's step, and q·2^s is exact again. In-place ops and the binade
    step read from the exponent bits keep it to about a dozen passes over the data.
    """
    shape = x.shape
    blocks = x.reshape(-1, BLOCK)
    field = (blocks.abs().amax(dim=1, keepdim=True).view(torch.int32) >> 23) & 0xFF
    shared = (field.sub(2).clamp_(min=0) - 127).float()  # floor(log2 amax) − 2, at least −127
    y = blocks * torch.exp2(-shared)
    mag = y.abs()
    # E2M1 step of |y|'s binade: 2^(clamp(floor(log2|y|), 0, 2) − 1), built from the exponent bits.
    step = ((mag.view(torch.int32) >> 23).clamp_(127, 129).sub_(1) << 23).view(torch.float32)
    out = mag.div_(step).round_().mul_(step).clamp_(max=6.0).mul_(torch.sign(y)).mul_(torch.exp2(shared))
    out.masked_fill_(field == 0xFF, float('nan'))  # a NaN or infinite amax: the NaN scale
    return out.reshape(shape)


class MxLinearFn(torch.autograd.Function):
    """Y = X·Wᵀ with each GEMM's operands fake-quantized along that GEMM's reduction dimension."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return fake_quant_mxfp4(x) @ fake_quant_mxfp4(w).t()

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        dy = dy.contiguous()
        dx = fake_quant_mxfp4(dy) @ fake_quant_mxfp4(w.t().contiguous()).t()
        dw = fake_quant_mxfp4(dy.t().contiguous()) @ fake_quant_mxfp4(x.t().contiguous()).t()
        return dx, dw


class Linear(torch.nn.Module):
    def __init__(self, out_f, in_f, std, mxfp4):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(out_f, in_f) * std)
        self.mxfp4 = mxfp4

    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1])
        y = MxLinearFn.apply(x2, self.weight) if self.mxfp4 else x2 @ self.weight.t()
        return y.reshape(*x.shape[:-1], -1)


def rms_norm(x, gain):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * gain


class Model(torch.nn.Module):
    def __init__(self, s, mxfp4):
        super().__init__()
        dim, hidden, layers = s['dim'], s['hidden'], s['layers']
        self.s = s
        residual_std = 0.02 / math.sqrt(2 * layers)
        self.embedding = torch.nn.Parameter(torch.randn(VOCAB, dim) * 0.02)
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            b = torch.nn.Module()
            b.norm1 = torch.nn.Parameter(torch.ones(dim))
            b.norm2 = torch.nn.Parameter(torch.ones(dim))
            for name, out_f, in_f, std in [('q', dim, dim, 0.02), ('k', dim, dim, 0.02), ('v', dim, dim, 0.02), ('o', dim, dim, residual_std),
                                           ('gate', hidden, dim, 0.02), ('up', hidden, dim, 0.02), ('down', dim, hidden, residual_std)]:
                setattr(b, name, Linear(out_f, in_f, std, mxfp4))
            self.blocks.append(b)
        self.final_norm = torch.nn.Parameter(torch.ones(dim))
        self.head = Linear(VOCAB, dim, 0.02, mxfp4)
        head_dim = dim // s['heads']
        half = head_dim // 2
        pos = torch.arange(s['seq_len'], dtype=torch.float64)[:, None]
        freq = torch.pow(10000.0, -2 * torch.arange(half, dtype=torch.float64) / head_dim)[None, :]
        self.register_buffer('cos', torch.cos(pos * freq).float())
        self.register_buffer('sin', torch.sin(pos * freq).float())
        self.register_buffer('mask', torch.triu(torch.ones(s['seq_len'], s['seq_len'], dtype=torch.bool), 1))

    def rope(self, x):  # x [batch, heads, seq, head_dim]: rotate (first half, second half) pairs
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * self.cos - x2 * self.sin, x1 * self.sin + x2 * self.cos], dim=-1)

    def forward(self, tokens):
        s = self.s
        B, S, H = s['batch'], s['seq_len'], s['heads']
        hd = s['dim'] // H
        h = self.embedding[tokens]
        for b in self.blocks:
            n = rms_norm(h, b.norm1)
            split = lambda t: t.view(B, S, H, hd).transpose(1, 2)
            q, k, v = self.rope(split(b.q(n))), self.rope(split(b.k(n))), split(b.v(n))
            scores = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(hd))
            p = torch.softmax(scores.masked_fill(self.mask, float('-inf')), dim=-1)
            attended = (p @ v).transpose(1, 2).reshape(B, S, -1)
            h = h + b.o(attended)
            n = rms_norm(h, b.norm2)
            h = h + b.down(torch.nn.functional.silu(b.gate(n)) * b.up(n))
        return self.head(rms_norm(h, self.final_norm))


class Runner:
    def __init__(self, preset, precision):
        torch.manual_seed(1)
        self.s = SHAPES[preset]
        self.model = Model(self.s, precision == 'mxfp4')
        decay = [p for n, p in self.model.named_parameters() if p.dim() == 2]
        gains = [p for n, p in self.model.named_parameters() if p.dim() == 1]
        self.opt = torch.optim.AdamW([{'params': decay, 'weight_decay': 0.1}, {'params': gains, 'weight_decay': 0.0}],
                                     lr=self.s['lr'], betas=(0.9, 0.95), eps=1e-8)
        self.gen = torch.Generator().manual_seed(5)
        self.step_index = 0

    def step(self):
        s = self.s
        # Random bytes stand in for the corpus: the step's cost does not depend on the text.
        window = torch.randint(0, VOCAB, (s['batch'], s['seq_len'] + 1), generator=self.gen)
        logits = self.model(window[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), window[:, 1:].reshape(-1))
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        warmup = 20
        lr = s['lr'] * min(1.0, (self.step_index + 1) / warmup)
        for group in self.opt.param_groups:
            group['lr'] = lr
        self.opt.step()
        self.step_index += 1
        return loss.item()


def blas_in_use():
    try:
        with open('/proc/self/maps') as maps:
            libs = {line.split()[-1] for line in maps if 'blas' in line.lower() or 'mkl' in line.lower()}
        return ', '.join(sorted(libs)) or 'none mapped'
    except OSError:
        return 'unknown'


def check(input_path, expected_path, row_length):
    """Bit-compares fake_quant_mxfp4 with src/mx's output on the same float32 values (raw little-endian files)."""
    with open(input_path, 'rb') as f:
        values = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
    with open(expected_path, 'rb') as f:
        expected = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
    got = fake_quant_mxfp4(values.reshape(-1, row_length)).reshape(-1)
    same = (got.view(torch.int32) == expected.view(torch.int32)) | (torch.isnan(got) & torch.isnan(expected))
    print(json.dumps({'values': values.numel(), 'differing': int((~same).sum())}))


def main():
    if len(sys.argv) == 5 and sys.argv[1] == '--check':
        return check(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    print(json.dumps({'torch': torch.__version__, 'threads': torch.get_num_threads(), 'blas': blas_in_use()}), flush=True)
    runners = {}
    for line in sys.stdin:
        ask = json.loads(line)
        key = (ask['preset'], ask['precision'])
        if key not in runners:
            runners[key] = Runner(*key)
        runner = runners[key]
        wall, cpu = time.perf_counter(), time.process_time()
        loss = 0.0
        for _ in range(ask['steps']):
            loss = runner.step()
        print(json.dumps({'seconds': time.perf_counter() - wall, 'cpu': time.process_time() - cpu, 'loss': loss}), flush=True)


if __name__ == '__main__':
    main()
