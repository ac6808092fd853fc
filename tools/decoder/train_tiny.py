#!/usr/bin/env python3
"""Trains the bundled tiny decoder (models/tiny-decoder) on the license texts under
/usr/share/common-licenses and saves its weights as an .npz that export_genai.py turns
into an ONNX model in the ONNX Runtime GenAI layout.

The model: byte-level vocabulary (256), decoder-only transformer with RMSNorm,
rotary position embedding (non-interleaved halves, base 10000), grouped-query attention
(4 query heads sharing 2 KV heads in contiguous groups), SwiGLU MLP, tied input/output
embeddings. Everything here matches what the exported graph computes:
  SimplifiedLayerNormalization  <->  rms_norm()
  GroupQueryAttention do_rotary=1 <-> rotate() + causal attention, scale 1/sqrt(H)
  Sigmoid, Mul                 <->  silu(gate) * up

Needs PyTorch (CPU is enough: `pip install torch`). Deterministic for a given torch
version and thread count: fixed seed, fixed data order.

    python3 tools/decoder/train_tiny.py --out /tmp/tiny.npz
    python3 tools/decoder/export_genai.py --weights /tmp/tiny.npz --out models/tiny-decoder
"""
import argparse
import glob
import hashlib
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import genai_graph  # noqa: E402  (config defaults and weight names shared with the exporter)


def load_corpus(root):
    """All regular license texts under root, each once (the directory has symlinks such
    as GPL -> GPL-3), in name order, separated by blank lines. Returns (bytes, names)."""
    seen, parts, names = set(), [], []
    for path in sorted(glob.glob(os.path.join(root, "*"))):
        real = os.path.realpath(path)
        if not os.path.isfile(real):
            continue
        data = open(real, "rb").read()
        digest = hashlib.sha256(data).hexdigest()
        if digest in seen:
            continue
        seen.add(digest)
        parts.append(data.strip() + b"\n\n")
        names.append(os.path.basename(path))
    return b"".join(parts), names


class Tiny(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        d, nq, nkv, h, f, v = (cfg["hidden"], cfg["num_heads"], cfg["num_kv_heads"],
                               cfg["head_dim"], cfg["mlp"], cfg["vocab_size"])
        self.embed = torch.nn.Parameter(torch.randn(v, d) * 0.02)
        self.layers = torch.nn.ModuleList()
        for _ in range(cfg["num_layers"]):
            layer = torch.nn.Module()
            layer.ln1 = torch.nn.Parameter(torch.ones(d))
            layer.q = torch.nn.Linear(d, nq * h, bias=False)
            layer.k = torch.nn.Linear(d, nkv * h, bias=False)
            layer.v = torch.nn.Linear(d, nkv * h, bias=False)
            layer.o = torch.nn.Linear(nq * h, d, bias=False)
            layer.ln2 = torch.nn.Parameter(torch.ones(d))
            layer.gate = torch.nn.Linear(d, f, bias=False)
            layer.up = torch.nn.Linear(d, f, bias=False)
            layer.down = torch.nn.Linear(f, d, bias=False)
            # Scaled init of the residual-branch outputs (GPT-2 style).
            for lin in (layer.o, layer.down):
                torch.nn.init.normal_(lin.weight, std=0.02 / math.sqrt(2 * cfg["num_layers"]))
            self.layers.append(layer)
        self.norm = torch.nn.Parameter(torch.ones(d))
        cos, sin = genai_graph.rotary_caches(cfg)
        self.register_buffer("cos", torch.from_numpy(cos), persistent=False)
        self.register_buffer("sin", torch.from_numpy(sin), persistent=False)

    def rms_norm(self, x, w):
        eps = self.cfg["rms_eps"]
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    def rotate(self, x):  # x (B, N, S, H); non-interleaved halves
        s = x.shape[2]
        cos, sin = self.cos[:s][None, None], self.sin[:s][None, None]
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    def forward(self, ids):
        cfg = self.cfg
        b, s = ids.shape
        nq, nkv, h = cfg["num_heads"], cfg["num_kv_heads"], cfg["head_dim"]
        x = self.embed[ids]
        for layer in self.layers:
            a = self.rms_norm(x, layer.ln1)
            q = self.rotate(layer.q(a).view(b, s, nq, h).transpose(1, 2))
            k = self.rotate(layer.k(a).view(b, s, nkv, h).transpose(1, 2))
            v = layer.v(a).view(b, s, nkv, h).transpose(1, 2)
            # Query head j reads KV head j // (nq // nkv): contiguous groups.
            k = k.repeat_interleave(nq // nkv, dim=1)
            v = v.repeat_interleave(nq // nkv, dim=1)
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + layer.o(att.transpose(1, 2).reshape(b, s, nq * h))
            m = self.rms_norm(x, layer.ln2)
            x = x + layer.down(F.silu(layer.gate(m)) * layer.up(m))
        x = self.rms_norm(x, self.norm)
        return x @ self.embed.t()

    def export_weights(self):
        """Weights under genai_graph's names; MatMul weights as (in, out)."""
        out = {genai_graph.EMBED: self.embed, genai_graph.LM_HEAD: self.embed.t(),
               genai_graph.FINAL_NORM: self.norm}
        for i, layer in enumerate(self.layers):
            n = genai_graph.layer_names(i)
            out[n["ln1"]] = layer.ln1
            out[n["ln2"]] = layer.ln2
            for key in ("q", "k", "v", "o", "gate", "up", "down"):
                out[n[key]] = getattr(layer, key).weight.t()
        return {k: v.detach().contiguous().numpy().astype(np.float32) for k, v in out.items()}


@torch.no_grad()
def greedy(model, prompt, n):
    ids = list(prompt)
    for _ in range(n):
        ctx = torch.tensor([ids[-model.cfg["max_length"]:]])
        ids.append(int(model(ctx)[0, -1].argmax()))
    return bytes(ids[len(prompt):])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="/usr/share/common-licenses")
    ap.add_argument("--out", required=True, help="weights .npz (config saved alongside as JSON inside)")
    ap.add_argument("--steps", type=int, default=2500)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--mlp", type=int, default=256)
    ap.add_argument("--max-length", type=int, default=1024)
    ap.add_argument("--prompt", default="The GNU General Public License is")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = genai_graph.default_config(
        vocab_size=256, hidden=args.hidden, num_layers=args.layers, num_heads=args.heads,
        num_kv_heads=args.kv_heads, head_dim=args.head_dim, mlp=args.mlp,
        max_length=args.max_length, tie_embeddings=True)

    corpus, names = load_corpus(args.data)
    data = torch.tensor(np.frombuffer(corpus, dtype=np.uint8).astype(np.int64))
    n_val = len(data) // 20
    train, val = data[:-n_val], data[-n_val:]
    print(f"corpus: {len(corpus)} bytes from {len(names)} files ({', '.join(names)}); "
          f"train {len(train)}, val {len(val)}", flush=True)

    model = Tiny(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"config: {json.dumps(cfg)}\nparameters: {n_params}", flush=True)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    warmup = max(1, args.steps // 30)

    def lr_at(step):
        if step < warmup:
            return args.lr * (step + 1) / warmup
        t = (step - warmup) / max(1, args.steps - warmup)
        return args.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * t)))

    gen = torch.Generator().manual_seed(args.seed)

    def batch(src, generator):
        starts = torch.randint(0, len(src) - args.seq - 1, (args.batch,), generator=generator)
        x = torch.stack([src[s:s + args.seq] for s in starts])
        y = torch.stack([src[s + 1:s + args.seq + 1] for s in starts])
        return x, y

    @torch.no_grad()
    def val_loss():
        model.eval()
        g = torch.Generator().manual_seed(0)
        losses = []
        for _ in range(4):
            x, y = batch(val, g)
            losses.append(F.cross_entropy(model(x).view(-1, 256), y.view(-1)).item())
        model.train()
        return sum(losses) / len(losses)

    t0 = time.time()
    running = None
    for step in range(args.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        x, y = batch(train, gen)
        loss = F.cross_entropy(model(x).view(-1, 256), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running = loss.item() if running is None else 0.95 * running + 0.05 * loss.item()
        if step % 100 == 0 or step == args.steps - 1:
            print(f"step {step:5d}  loss {loss.item():.4f}  avg {running:.4f}  "
                  f"lr {lr_at(step):.2e}  {time.time() - t0:6.1f}s", flush=True)
    elapsed = time.time() - t0
    final_val = val_loss()
    print(f"trained {args.steps} steps in {elapsed:.1f}s; final train loss (avg) {running:.4f}, "
          f"val loss {final_val:.4f} nats/byte", flush=True)
    model.eval()
    sample = greedy(model, args.prompt.encode(), 200)
    print("sample:", repr(args.prompt + sample.decode("utf-8", "replace")), flush=True)

    weights = model.export_weights()
    meta = {"config": cfg, "training": {
        "data": args.data, "files": names, "corpus_bytes": len(corpus), "steps": args.steps,
        "batch": args.batch, "seq": args.seq, "lr": args.lr, "seed": args.seed,
        "parameters": n_params, "seconds": round(elapsed, 1), "train_loss": round(running, 4),
        "val_loss": round(final_val, 4), "torch": torch.__version__,
        "threads": torch.get_num_threads()}}
    np.savez(args.out, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **weights)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
