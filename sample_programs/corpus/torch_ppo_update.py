"""One PPO update step of a discrete-action actor-critic trained on batched GPU environments.

The rollout buffer holds T = 8 steps of 8192 parallel environments (65536 transitions):
observations (64 float32 features), actions (16 discrete choices), the behaviour policy's
log-probabilities, the value estimates, rewards and done flags, and the bootstrap value of the
observation after the last step. The model is a shared MLP trunk (64 -> 512 -> 256, tanh,
orthogonal initialisation) with a policy head (256 -> 16 logits) and a value head (256 -> 1),
all FP32.

One step is the start of an update: generalised advantage estimation (gamma 0.99, lambda
0.95), with the temporal-difference residuals formed for all steps at once and the backward
recursion as a Python loop over the 8 time steps in reverse; the returns; advantage
normalisation over the whole batch; then the gradient step of the first of 4 shuffled
minibatches (16384 transitions, indices drawn on the host with NumPy): log-softmax policy,
probability ratio, clipped surrogate objective (clip 0.2), value MSE (coefficient 0.5),
entropy bonus (coefficient 0.01), backward, and ``torch.optim.Adam`` (lr 3e-4, eps 1e-5)
with PyTorch's default implementation choice.

``--vec-gae`` computes the advantages without the time loop, as one weighted sum of the
residuals with a [T, T, envs] matrix of cumulative discounts (``torch.cumprod``), and uses
``Adam(fused=True)``.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import DEV, parser, run  # noqa: E402

p = parser(__doc__)
p.add_argument("--vec-gae", action="store_true",
               help="GAE without the time loop, and Adam(fused=True)")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
T, ENVS, OBS, ACTIONS, HIDDEN = 8, 8192, 64, 16, (512, 256)
BATCH = T * ENVS
N_MINIBATCHES = 4
MB = BATCH // N_MINIBATCHES
GAMMA, LAM, CLIP, VF_COEF, ENT_COEF, LR = 0.99, 0.95, 0.2, 0.5, 0.01, 3e-4


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(OBS, HIDDEN[0]), nn.Tanh(),
                                   nn.Linear(HIDDEN[0], HIDDEN[1]), nn.Tanh())
        self.pi = nn.Linear(HIDDEN[1], ACTIONS)
        self.v = nn.Linear(HIDDEN[1], 1)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.orthogonal_(m.weight, gain=2 ** 0.5)
                nn.init.zeros_(m.bias)
        nn.init.orthogonal_(self.pi.weight, gain=0.01)
        nn.init.orthogonal_(self.v.weight, gain=1.0)

    def forward(self, obs):
        h = self.trunk(obs)
        return self.pi(h), self.v(h).squeeze(-1)


model = ActorCritic().to(dev)        # initialised on the host, then moved
if args.vec_gae:
    opt = torch.optim.Adam(model.parameters(), lr=LR, eps=1e-5, fused=True)
else:
    opt = torch.optim.Adam(model.parameters(), lr=LR, eps=1e-5)

# --- the rollout buffer, as the collection phase leaves it ---
with torch.no_grad():
    obs = torch.randn(T, ENVS, OBS, device=dev)
    logits0, values = model(obs)                                      # values: [T, ENVS]
    actions = torch.multinomial(F.softmax(logits0.reshape(-1, ACTIONS), -1), 1).view(T, ENVS)
    logp_old = F.log_softmax(logits0, -1).gather(-1, actions[..., None]).squeeze(-1)
    rewards = 0.1 * torch.randn(T, ENVS, device=dev) + 0.5 * (actions == 3).float()
    dones = (torch.rand(T, ENVS, device=dev) < 0.02).float()         # episode ended after t
    last_value = model(torch.randn(ENVS, OBS, device=dev))[1]         # V(s_T)
b_obs = obs.reshape(BATCH, OBS)
b_actions = actions.reshape(BATCH)
b_logp = logp_old.reshape(BATCH)
b_values = values.reshape(BATCH)

# constants of the vectorised GAE
STRICT_UPPER = torch.ones(T, T, dtype=torch.bool, device=dev).triu(1)    # s > t
UPPER = torch.ones(T, T, device=dev).triu()                               # s >= t

np_rng = np.random.default_rng(0)
out = {}


def td_residuals(rewards, values, dones, last_value):
    next_values = torch.cat([values[1:], last_value[None]])
    not_done = 1.0 - dones
    deltas = rewards + GAMMA * next_values * not_done - values
    decay = GAMMA * LAM * not_done
    return deltas, decay


def gae_loop(rewards, values, dones, last_value):
    deltas, decay = td_residuals(rewards, values, dones, last_value)
    gae = torch.zeros_like(last_value)
    advantages = []
    for t in reversed(range(T)):
        gae = deltas[t] + decay[t] * gae
        advantages.append(gae)
    return torch.stack(advantages[::-1])


def gae_vectorised(rewards, values, dones, last_value):
    deltas, decay = td_residuals(rewards, values, dones, last_value)
    # factor[t, s] = decay[s - 1] for s > t and 1 otherwise; its running product over s is
    # prod_{j=t}^{s-1} decay[j], the weight of residual s in the advantage at t (s >= t)
    prev_decay = torch.cat([torch.ones_like(decay[:1]), decay[:-1]])
    factor = torch.where(STRICT_UPPER[:, :, None], prev_decay[None], 1.0)
    weights = torch.cumprod(factor, dim=1) * UPPER[:, :, None]
    return (weights * deltas[None]).sum(1)


def step():
    gae = gae_vectorised if args.vec_gae else gae_loop
    advantages = gae(rewards, values, dones, last_value)              # [T, ENVS]
    b_adv = advantages.reshape(BATCH)
    b_returns = b_adv + b_values
    b_adv = (b_adv - b_adv.mean()) / (b_adv.std() + 1e-8)

    mb = torch.from_numpy(np_rng.permutation(BATCH)[:MB]).to(dev)    # first minibatch
    logits, value = model(b_obs[mb])
    logp_all = F.log_softmax(logits, dim=-1)
    logp = logp_all.gather(1, b_actions[mb].unsqueeze(1)).squeeze(1)
    entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
    ratio = torch.exp(logp - b_logp[mb])
    adv = b_adv[mb]
    pg_loss = -torch.min(ratio * adv, ratio.clamp(1.0 - CLIP, 1.0 + CLIP) * adv).mean()
    v_loss = F.mse_loss(value, b_returns[mb])
    loss = pg_loss + VF_COEF * v_loss - ENT_COEF * entropy

    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    out["advantages"], out["returns"], out["loss"] = advantages, b_returns, loss.detach()


def check():
    r, v, d = (t.double().cpu().numpy() for t in (rewards, values, dones))
    lv = last_value.double().cpu().numpy()
    ref = np.zeros((T, ENVS))
    gae = np.zeros(ENVS)
    for t in reversed(range(T)):
        nv = lv if t == T - 1 else v[t + 1]
        delta = r[t] + GAMMA * nv * (1.0 - d[t]) - v[t]
        gae = delta + GAMMA * LAM * (1.0 - d[t]) * gae
        ref[t] = gae
    got = out["advantages"].double().cpu().numpy()
    err = np.abs(got - ref).max() / np.abs(ref).max()
    if not err < 1e-4:
        raise AssertionError(f"advantages: relative error {err:.3g}")
    err = np.abs(out["returns"].double().cpu().numpy() - (ref + v).reshape(-1)).max()
    if not err < 1e-4:
        raise AssertionError(f"returns: max error {err:.3g}")
    if not torch.isfinite(out["loss"]):
        raise AssertionError("non-finite loss")
    for name, prm in model.named_parameters():
        if not torch.isfinite(prm).all():
            raise AssertionError(f"non-finite parameter {name}")


run(step, name="torch_ppo_update", backend="torch", args=args,
    variant="vec_gae" if args.vec_gae else "baseline", check=check)
