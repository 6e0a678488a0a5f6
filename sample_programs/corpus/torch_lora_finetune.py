"""One LoRA fine-tuning step of a Llama-style causal LM under bf16 autocast, PEFT style.

A TinyLlama-1.1B-shaped model cut to one decoder layer (hidden 2048, 32 query heads and 4
key/value heads of 64, SwiGLU MLP of width 5632, RMSNorm, rotary embeddings, vocabulary
32000, untied LM head), written like the Hugging Face ``LlamaForCausalLM`` modules: RMSNorm
in float32 then cast back to the input dtype, ``rotate_half`` RoPE with the cos/sin table
computed from ``inv_freq`` every forward, ``repeat_kv`` for grouped-query attention and
``F.scaled_dot_product_attention(is_causal=True)``, the logits upcast to float32 for the loss.

The base model is frozen (``requires_grad_(False)``) and LoRA adapters are added the way
PEFT's ``LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules=["q_proj",
"v_proj"])`` does: ``base(x) + lora_B(lora_A(dropout(x))) * scaling`` with the adapter
matrices as separate ``nn.Linear`` layers (A Kaiming-uniform, B zero), float32. A batch of 2
packed sequences of 512 tokens (synthetic token ids), ``AdamW(fused=True)`` over the adapter
parameters only.

As loaded the base weights are float32 (``from_pretrained`` without ``torch_dtype``), so
autocast casts every frozen weight matrix (q, k, v, o, gate, up, down, LM head: 110M
parameters) to bf16 on every forward. ``--bf16-base`` stores the frozen base model in bf16
(``torch_dtype=torch.bfloat16``, as the PEFT examples do) and keeps the adapters in float32.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import DEV, parser, run  # noqa: E402

p = parser(__doc__)
p.add_argument("--bf16-base", action="store_true",
               help="frozen base weights stored in bf16 instead of float32")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
VOCAB, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, LAYERS = 32000, 2048, 32, 4, 64, 5632, 1
BATCH, SEQ, RANK, ALPHA, LORA_DROPOUT, THETA, EPS = 2, 512, 16, 32, 0.05, 10000.0, 1e-5


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=EPS):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self):
        super().__init__()
        inv_freq = 1.0 / (THETA ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float32) / HEAD_DIM))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv_freq = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        pos = position_ids[:, None, :].float()
        with torch.autocast(device_type=x.device.type, enabled=False):
            freqs = (inv_freq @ pos).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos(), emb.sin()
        return cos.to(x.dtype), sin.to(x.dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def repeat_kv(hidden_states, n_rep):
    b, kvh, t, d = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(b, kvh, n_rep, t, d)
    return hidden_states.reshape(b, kvh * n_rep, t, d)


class LoraLinear(nn.Module):
    """PEFT's ``lora.Linear`` wrapper around a frozen ``nn.Linear``."""

    def __init__(self, base_layer, r=RANK, lora_alpha=ALPHA, lora_dropout=LORA_DROPOUT):
        super().__init__()
        self.base_layer = base_layer
        self.lora_dropout = nn.Dropout(lora_dropout)
        self.lora_A = nn.Linear(base_layer.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base_layer.out_features, bias=False)
        self.scaling = lora_alpha / r
        nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B.weight)

    def forward(self, x):
        result = self.base_layer(x)
        return result + self.lora_B(self.lora_A(self.lora_dropout(x))) * self.scaling


class LlamaAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
        self.k_proj = nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
        self.v_proj = nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
        self.o_proj = nn.Linear(HEADS * HEAD_DIM, HIDDEN, bias=False)

    def forward(self, hidden_states, cos, sin):
        b, t, _ = hidden_states.shape
        q = self.q_proj(hidden_states).view(b, t, -1, HEAD_DIM).transpose(1, 2)
        k = self.k_proj(hidden_states).view(b, t, -1, HEAD_DIM).transpose(1, 2)
        v = self.v_proj(hidden_states).view(b, t, -1, HEAD_DIM).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        k, v = repeat_kv(k, HEADS // KV_HEADS), repeat_kv(v, HEADS // KV_HEADS)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(o.transpose(1, 2).reshape(b, t, -1))


class LlamaMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = nn.Linear(HIDDEN, FFN, bias=False)
        self.up_proj = nn.Linear(HIDDEN, FFN, bias=False)
        self.down_proj = nn.Linear(FFN, HIDDEN, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = LlamaAttention()
        self.mlp = LlamaMLP()
        self.input_layernorm = LlamaRMSNorm(HIDDEN)
        self.post_attention_layernorm = LlamaRMSNorm(HIDDEN)

    def forward(self, hidden_states, cos, sin):
        hidden_states = hidden_states + self.self_attn(self.input_layernorm(hidden_states), cos, sin)
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))


class LlamaForCausalLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(LlamaDecoderLayer() for _ in range(LAYERS))
        self.norm = LlamaRMSNorm(HIDDEN)
        self.rotary_emb = LlamaRotaryEmbedding()
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, LlamaRMSNorm):
                    m.weight.copy_(1.0 + 0.1 * torch.randn_like(m.weight))

    def forward(self, input_ids, labels):
        position_ids = torch.arange(input_ids.shape[1], device=input_ids.device)[None]
        h = self.embed_tokens(input_ids)
        cos, sin = self.rotary_emb(h, position_ids)
        for layer in self.layers:
            h = layer(h, cos, sin)
        logits = self.lm_head(self.norm(h)).float()
        shift_logits = logits[:, :-1, :].reshape(-1, VOCAB)
        shift_labels = labels[:, 1:].reshape(-1)
        return F.cross_entropy(shift_logits, shift_labels)


model = LlamaForCausalLM()
if args.bf16_base:
    model = model.to(torch.bfloat16)               # from_pretrained(torch_dtype=bfloat16)
model.requires_grad_(False)
for layer in model.layers:                        # get_peft_model(model, LoraConfig(...))
    attn = layer.self_attn
    attn.q_proj, attn.v_proj = LoraLinear(attn.q_proj), LoraLinear(attn.v_proj)
model = model.to(dev).train()
lora_params = [prm for n, prm in model.named_parameters() if "lora_" in n]
assert all(prm.dtype == torch.float32 and prm.requires_grad for prm in lora_params)
opt = torch.optim.AdamW(lora_params, lr=2e-4, weight_decay=0.0, fused=dev == "cuda")


def make_corpus(gen, n_seq=64):
    """Token sequences with Zipf-like unigrams and repeated phrases, [n_seq, SEQ] int64."""
    ranks = torch.arange(1, VOCAB + 1, dtype=torch.float64)
    probs = (1.0 / ranks ** 1.05) / (1.0 / ranks ** 1.05).sum()
    toks = torch.multinomial(probs, n_seq * SEQ, replacement=True, generator=gen).view(n_seq, SEQ)
    phrases = torch.multinomial(probs, 200 * 8, replacement=True, generator=gen).view(200, 8)
    for s in range(n_seq):
        for pos in torch.randint(0, SEQ - 8, (SEQ // 32,), generator=gen).tolist():
            toks[s, pos:pos + 8] = phrases[torch.randint(0, 200, (1,), generator=gen).item()]
    return toks


corpus = make_corpus(torch.Generator().manual_seed(0)).to(dev)
base_before = model.layers[0].mlp.down_proj.weight.detach().clone()
out = {}


def step():
    idx = torch.randint(0, corpus.shape[0], (BATCH,), device=dev)
    input_ids = corpus[idx]
    with torch.autocast(device_type=dev, dtype=torch.bfloat16):
        loss = model(input_ids, input_ids)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    out.update(loss=loss.detach(), ids=input_ids)


def check():
    loss = float(out["loss"])
    if not math.isfinite(loss) or not 5.0 < loss < 12.0:
        raise AssertionError(f"loss {loss}")
    if not torch.equal(model.layers[0].mlp.down_proj.weight, base_before):
        raise AssertionError("a frozen base weight changed")
    b = model.layers[0].self_attn.q_proj.lora_B.weight
    if b.abs().max().item() == 0:
        raise AssertionError("lora_B was not updated")
    if any(prm.grad is not None for prm in model.parameters() if not prm.requires_grad):
        raise AssertionError("a frozen parameter received a gradient")
    model.eval()                                   # dropout off: autocast vs float32
    with torch.no_grad():
        with torch.autocast(device_type=dev, dtype=torch.bfloat16):
            got = model(out["ids"], out["ids"]).item()
        ref = model if not args.bf16_base else None
        if ref is None:                            # float32 copy of the bf16 weights
            import copy
            ref = copy.deepcopy(model).float()
        want = ref(out["ids"], out["ids"]).item()
    model.train()
    if not abs(got - want) < 0.02 * abs(want):
        raise AssertionError(f"autocast loss {got} vs float32 {want}")


run(step, name="torch_lora_finetune", backend="torch", args=args,
    variant="bf16_base" if args.bf16_base else "baseline", check=check)
