"""A 10-step PyTorch training loop of a small transformer language model, as people write it.

One pre-norm decoder block (causal scaled-dot-product attention, GELU MLP), token and position
embeddings, a tied-free LM head, cross-entropy, AdamW with its default (multi-tensor)
implementation, FP32 with TF32 matmuls, one NVTX range per step. About 70 kernel launches a
step from a few dozen kernel shapes: the case ``ncu-advise``'s default census-then-depth
profiling is for (``sample_programs/torch_train_loop.py`` is the same loop over a small MLP).
``--steps N`` and ``--layers L`` change its size.
"""
import argparse

import torch
import torch.nn.functional as F

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--layers", type=int, default=1)
args = p.parse_args()

torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = True
dev = "cuda"
vocab, d, heads, seq, batch = 4096, 512, 8, 256, 16


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, heads, d // heads).transpose(1, 3).unbind(2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class LM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = torch.nn.Embedding(vocab, d), torch.nn.Embedding(seq, d)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(args.layers))
        self.ln, self.head = torch.nn.LayerNorm(d), torch.nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


model = LM().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
data = torch.randint(0, vocab, (batch, seq + 1), device=dev)
x, y = data[:, :-1], data[:, 1:]
for step in range(args.steps):
    torch.cuda.nvtx.range_push(f"step {step}")
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
    loss.backward()
    opt.step()
    torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print(f"torch_transformer_loop: {args.steps} steps, loss {loss.item():.4f}")
