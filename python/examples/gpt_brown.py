"""A small character-level GPT trained on media/data/brown-sample.txt, served to MX Scope.

The model has what real GPTs have and what trips up MXFP4 tooling: tied input/output embeddings,
biases, and a vocabulary of 82 characters (not a multiple of 32, so the lm_head's Dgrad reduction
dimension ends in a partial MX block, and a Hadamard rotation pads it to 96).

    python3 python/examples/gpt_brown.py            # listens on ws://127.0.0.1:7340

Then in VS Code: "MX Scope: Connect to Trainer" (the default URL), press Start in the dashboard;
"Switch Rotation" and "Start Next Run" start the next run with another rotation. Every run starts
from the same seeded initial weights unless the extension changes the seed. Ctrl-C ends the run in
progress (stopped) and exits.

The lines marked `# MX Scope` are all the bridge needs; the rest is a plain PyTorch loop.
"""
import argparse
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from mxscope_bridge import Bridge, default_gemms, gemm_config, run_config  # noqa: E402  # MX Scope

DATA = os.path.join(HERE, "..", "..", "media", "data", "brown-sample.txt")


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.fc_out = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        attended = (scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(attended)
        return x + self.fc_out(F.gelu(self.fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, vocab: int, dim: int, layers: int, heads: int, seq: int):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, dim)
        self.pos_emb = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # weight tying
        self.reset_parameters()

    def reset_parameters(self):
        """GPT-2's init (Run.reset calls this: a root's reset_parameters replaces the modules' own)."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
            if isinstance(module, nn.LayerNorm):
                module.reset_parameters()

    def forward(self, tokens):
        x = self.tok_emb(tokens) + self.pos_emb(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def batches(data: torch.Tensor, batch: int, seq: int, generator: torch.Generator):
    while True:
        starts = torch.randint(0, len(data) - seq - 1, (batch,), generator=generator)
        rows = torch.stack([data[s:s + seq + 1] for s in starts.tolist()])
        yield rows[:, :-1], rows[:, 1:]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--stats-every", type=int, default=10)
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--rotation", default="none", choices=["none", "hadamard", "random-hadamard"], help="the first run's Wgrad rotation")
    parser.add_argument("--observe", action="store_true", help="no emulation: the GEMMs run in fp32, the bridge simulates MXFP4")
    parser.add_argument("--port", type=int, default=7340)
    parser.add_argument("--token", default=None)
    parser.add_argument("--out", default="mxscope-runs")
    parser.add_argument("--max-runs", type=int, default=None)
    parser.add_argument("--idle-timeout", type=float, default=None, help="exit after this many seconds without a Start")
    args = parser.parse_args(argv)

    with open(DATA, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([index[c] for c in text], dtype=torch.long)
    split = int(len(data) * 0.9)
    train_data, val_data = data[:split], data[split:]
    model = GPT(len(chars), args.dim, args.layers, args.heads, args.seq)

    gemms = default_gemms(gemm_config("mxfp4", "none", 32))  # MX Scope
    gemms["wgrad"] = gemm_config("mxfp4", args.rotation, 32)  # MX Scope
    config = run_config(preset="gpt-brown", steps=args.steps, tokens_per_step=args.batch * args.seq, stats_every=args.stats_every,  # MX Scope
                        eval_every=args.eval_every, data="brown-sample", gemms=gemms, model={"vocab": len(chars), "dim": args.dim,  # MX Scope
                        "layers": args.layers, "heads": args.heads, "seqLen": args.seq, "batch": args.batch}, optimizer={"name": "adamw", "lr": args.lr})  # MX Scope
    with Bridge(model, config, emulate=not args.observe, port=args.port, token=args.token, out_dir=args.out) as bridge:  # MX Scope
        for run in bridge.runs(idle_timeout=args.idle_timeout, max_runs=args.max_runs):  # MX Scope
            run.reset(model)  # MX Scope: seeds torch with the run's seed and re-initializes the weights
            optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
            train_batches = batches(train_data, args.batch, args.seq, torch.Generator().manual_seed(run.seed))
            for step in run.steps():  # MX Scope: `for step in range(args.steps):` in a plain loop
                x, y = next(train_batches)
                loss = F.cross_entropy(model(x).reshape(-1, len(chars)), y.reshape(-1))
                loss.backward()
                grad_norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                run.end_step(loss=loss.item(), lr=args.lr, grad_norm=grad_norm.item())  # MX Scope
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                if args.eval_every and (step + 1) % args.eval_every == 0:
                    with torch.no_grad():
                        vx, vy = next(batches(val_data, args.batch, args.seq, torch.Generator().manual_seed(step)))
                        val_loss = F.cross_entropy(model(vx).reshape(-1, len(chars)), vy.reshape(-1)).item()
                    run.validation(val_loss)  # MX Scope
                    print(f"run {run.id} step {step} loss {loss.item():.3f} val {val_loss:.3f}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
