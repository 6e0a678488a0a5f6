"""One token of a sampled generation loop over a 128k vocabulary, Hugging Face ``generate`` style:
the final norm, the LM head and the logits processors of a Llama-3-8B-shaped model.

A batch of 32 chat completions being sampled (``do_sample=True, temperature=0.6,
top_p=0.9, repetition_penalty=1.1``, Llama 3's generation settings plus a repetition
penalty), each with 960 tokens of prompt and generated text so far. The transformer body is
not part of this program: the last layer's hidden states of the new position ([32, 4096]
bf16) come from a recorded buffer of 64 steps. The step is what ``generate``'s sampling loop
runs after the body, written like the ``transformers`` code:

- ``LlamaRMSNorm`` (in float32, cast back to bf16) and ``lm_head`` ([128256, 4096] bf16,
  1.05 GB), the logits of the last position upcast to float32 ([32, 128256], 16 MB);
- ``RepetitionPenaltyLogitsProcessor``: ``gather`` the scores of every token already in the
  sequence, divide positive / multiply negative ones by 1.1, ``scatter`` them back;
- ``TemperatureLogitsWarper`` (divide by 0.6);
- ``TopPLogitsWarper``: ``torch.sort`` of the whole vocabulary (ascending), softmax,
  cumulative sum, mask of the tokens outside the 0.9 nucleus (the last token always kept),
  ``scatter`` of the mask back to vocabulary order, ``masked_fill`` with -inf;
- ``softmax`` and ``torch.multinomial(probs, 1)``; finished sequences get the pad token;
  ``torch.cat`` of the new tokens onto ``input_ids``; the EOS stopping criterion
  (``torch.isin`` over the two EOS ids) and ``unfinished_sequences &= ~is_done``.

``generate`` reads ``unfinished_sequences.max() == 0`` on the host once per token; this step
does the same (one device-to-host copy), as the real loop would. Not planted with anything:
one GEMV-shaped matmul that streams the 1 GB head (about 0.25 ms at the DRAM roof) and a
batched full-vocabulary sort, softmaxes and scatters on 16 MB float32 tensors. Estimated
0.5-1 ms.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from common import DEV, parser, run  # noqa: E402

args = parser(__doc__).parse_args()
torch.manual_seed(0)
dev = DEV
VOCAB, HIDDEN, BATCH, CONTEXT, RECORDED, EPS = 128256, 4096, 32, 960, 64, 1e-5
TEMPERATURE, TOP_P, REP_PENALTY, PAD_ID, EOS_IDS = 0.6, 0.9, 1.1, 128004, (128001, 128009)


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


class RepetitionPenaltyLogitsProcessor:
    def __init__(self, penalty):
        self.penalty = penalty

    def __call__(self, input_ids, scores):
        score = torch.gather(scores, 1, input_ids)
        score = torch.where(score < 0, score * self.penalty, score / self.penalty)
        return scores.scatter(1, input_ids, score)


class TemperatureLogitsWarper:
    def __init__(self, temperature):
        self.temperature = temperature

    def __call__(self, input_ids, scores):
        return scores / self.temperature


class TopPLogitsWarper:
    def __init__(self, top_p, filter_value=-float("inf"), min_tokens_to_keep=1):
        self.top_p, self.filter_value, self.min_tokens_to_keep = top_p, filter_value, min_tokens_to_keep

    def __call__(self, input_ids, scores):
        sorted_logits, sorted_indices = torch.sort(scores, descending=False)
        cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        sorted_indices_to_remove = cumulative_probs <= (1 - self.top_p)
        sorted_indices_to_remove[..., -self.min_tokens_to_keep:] = 0
        indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices,
                                                             sorted_indices_to_remove)
        return scores.masked_fill(indices_to_remove, self.filter_value)


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = LlamaRMSNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, h):
        return self.lm_head(self.norm(h))


gen = torch.Generator().manual_seed(0)
head = Head()
with torch.no_grad():
    # a head whose logits have an LM-like spread: a low-rank "frequent token" direction plus noise
    w = torch.randn(VOCAB, HIDDEN, generator=gen) * 0.012
    freq = torch.randn(VOCAB, 1, generator=gen) * 0.8 - 1.6 * torch.log1p(
        torch.arange(VOCAB, dtype=torch.float32)[torch.randperm(VOCAB, generator=gen)] / 50.0)[:, None]
    w[:, :1] = freq / 8.0
    head.lm_head.weight.copy_(w)
    head.norm.weight.copy_(1.0 + 0.1 * torch.randn(HIDDEN, generator=gen))
head = head.to(dev, torch.bfloat16).eval()
hidden_buf = torch.randn(RECORDED, BATCH, 1, HIDDEN, generator=gen)
hidden_buf[..., 0] = 8.0                               # the "frequent token" direction
hidden_buf = hidden_buf.to(dev, torch.bfloat16)
prompt = torch.randint(0, 128000, (BATCH, CONTEXT), generator=gen).to(dev)
processors = [RepetitionPenaltyLogitsProcessor(REP_PENALTY), TemperatureLogitsWarper(TEMPERATURE),
              TopPLogitsWarper(TOP_P)]
eos = torch.tensor(EOS_IDS, device=dev)
sample_gen = torch.Generator(device=dev).manual_seed(1234)
state = {"input_ids": prompt, "unfinished": torch.ones(BATCH, dtype=torch.long, device=dev),
         "t": 0}


@torch.no_grad()
def step():
    input_ids, unfinished = state["input_ids"], state["unfinished"]
    h = hidden_buf[state["t"] % RECORDED]
    next_token_logits = head(h)[:, -1, :].to(copy=True, dtype=torch.float32)
    next_token_scores = next_token_logits
    for proc in processors:
        next_token_scores = proc(input_ids, next_token_scores)
    probs = nn.functional.softmax(next_token_scores, dim=-1)
    next_tokens = torch.multinomial(probs, num_samples=1, generator=sample_gen).squeeze(1)
    next_tokens = next_tokens * unfinished + PAD_ID * (1 - unfinished)
    input_ids = torch.cat([input_ids[:, -CONTEXT:], next_tokens[:, None]], dim=-1)
    is_done = torch.isin(input_ids[:, -1], eos)
    unfinished = unfinished & ~is_done
    this_peer_finished = unfinished.max() == 0         # host read, as in generate()
    if bool(this_peer_finished):
        unfinished = torch.ones_like(unfinished)        # the next batch of requests
    # keep the context length fixed from step to step (the oldest token scrolls out)
    state.update(input_ids=input_ids[:, 1:], unfinished=unfinished, t=state["t"] + 1,
                 probs=probs, scores=next_token_scores, logits=next_token_logits,
                 next=next_tokens, ctx=input_ids[:, :-1])


def check():
    probs, scores, logits, nxt, ctx = (state[k] for k in ("probs", "scores", "logits", "next", "ctx"))
    if not torch.allclose(probs.sum(-1), torch.ones(BATCH, device=dev), atol=1e-4):
        raise AssertionError("probabilities do not sum to 1")
    kept = torch.isfinite(scores).sum(-1).float()
    if not (kept.min() >= 1 and kept.median() < VOCAB / 2):
        raise AssertionError(f"nucleus sizes {kept.min().item()}..{kept.max().item()}")
    if (probs.gather(1, nxt[:, None]) <= 0).any():
        raise AssertionError("sampled a token outside the nucleus")
    # reference for two rows: penalty, temperature and the nucleus by a float64 loop
    for r in range(2):
        s = logits[r].double().clone()
        seen = torch.unique(ctx[r])
        s[seen] = torch.where(s[seen] < 0, s[seen] * REP_PENALTY, s[seen] / REP_PENALTY)
        s = s / TEMPERATURE
        p = torch.softmax(s, -1)
        ps, order = torch.sort(p, descending=True)
        before = torch.cumsum(ps, 0) - ps               # mass of the more likely tokens
        nucleus = order[before < TOP_P + 1e-6]
        got = torch.isfinite(scores[r]).nonzero().squeeze(1)
        n_want, n_got = nucleus.numel(), got.numel()
        if abs(n_want - n_got) > max(2, 0.01 * n_want):
            raise AssertionError(f"row {r}: nucleus of {n_got} tokens, reference {n_want}")
    print(f"median nucleus {kept.median().item():.0f} tokens, "
          f"max prob {probs.max().item():.3f}", file=sys.stderr)


run(step, name="torch_topp_sample", backend="torch", args=args, check=check)
