"""FedGraph's DDPG sampling agent (paper Section 4, Algorithm 4), Flower-free and exportable.

Markov decision process:

* **State** s'[t] = PCA(W_bar[t], W_1[t], ..., W_|C|[t]): every model (global first, then clients in a fixed
  order) flattened (its named arrays in the order first seen, concatenated) and projected on the same
  ``pca_components`` (20) principal axes, concatenated: a vector of 20 (|C| + 1) numbers.
  *How the PCA is fitted*: once, on the first observation whose |C| + 1 weight vectors are not all equal
  (normally the end of the first round, when the clients' weights have diverged from the broadcast one), with
  those vectors as samples: centred by their mean, axes from a numpy SVD (sklearn's PCA axes up to sign; here
  each axis's largest-magnitude entry is made positive). |C| + 1 samples give at most |C| axes; missing
  axes project to 0 (the state keeps 20 numbers per model). The PCA is never refitted, so states stay
  comparable across rounds and episodes. Before it is fitted (the very first state, where all models are the
  initial one) the state is all zeros.
* **Action** a[t] in [-1, 1]^{|C| (1 + K)}: per client, one number for kappa_i and one per convolution for
  p^(k)_i, mapped linearly by :class:`ActionSpace` to kappa in [kappa_min, kappa_max] (rounded; a client with
  fewer labelled nodes uses all of them) and p in [p_min, p_max].
* **Reward** eq. 9 (:func:`flowergraph.methods.fedgraph.maths.server.reward`).

Networks: actor mu(s) = tanh(L3 relu(L2 relu(L1 s))) and critic q(s, a) = L3 relu(L2 relu(L1 [s, a])), hidden
512 and 256 (paper), the action concatenated with the state at the critic's input. Target networks start as
copies. Update (eq. 10-14) from a uniform mini-batch of K transitions of the replay buffer:

    critic: minimise mean (r + gamma (1 - done) q~(s', mu~(s')) - q(s, a))^2          (Adam, critic_lr)
    actor:  minimise -mean q(s, mu(s))                                                (Adam, actor_lr)
    targets: theta~ <- tau theta + (1 - tau) theta~                                   (phi in the paper)

Optional TD3 rule (``DDPGConfig`` fields from :data:`UPDATE_RULES["td3"]`; Fujimoto et al., ICML 2018; *not in the
paper*, which uses the plain DDPG update above): a second critic q2 with its own target and Adam; the target
becomes r + gamma (1 - done) min(q~, q2~)(s', clip(mu~(s') + clip(N(0, 0.2^2), -0.5, 0.5), -1, 1)), both critics
regress on it, and the actor (on q) and all targets move on every 2nd update only. It exists to test whether the
plain update's late relapses (``docs/methods/fedgraph.md``) are the critic's over-estimation.

Exploration: a[t] = clip(mu(s'[t]) + N(0, sigma^2 I), -1, 1), sigma multiplied by ``noise_decay`` after each
episode (not below ``noise_min``). The replay buffer is a ring of ``buffer_capacity`` transitions (the oldest
dropped when full); the last transition of an episode (round T) is terminal (done = 1: no bootstrap).

Episodes of T = ``episode_rounds`` rounds (Algorithm 4): :meth:`DDPGAgent.start_episode` takes s'[0] and gives
a[0]; after each round t = 1..T, :meth:`DDPGAgent.record` takes r[t-1] and s'[t], stores the transition, updates
the networks and gives a[t] (None after round T: the caller starts a new federated training and episode).

Everything (four networks, both Adam states, the buffer, the noise/sampling generator, the PCA, the episode
position) goes to named arrays plus JSON values with :meth:`DDPGAgent.export_state` and back with
:meth:`DDPGAgent.from_state`, bit for bit: a restored agent acts and updates exactly as the original would.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ....errors import ConfigError
from ....tasks.torch_state import load_module_arrays, load_optimizer_state, module_arrays, optimizer_state
from .sampling import SamplingPolicy


@dataclass(frozen=True)
class ActionSpace:
    """Maps actions in [-1, 1] to sampling policies: per client ``1 + num_convs`` numbers."""

    num_clients: int
    num_convs: int = 2
    kappa_min: int = 32
    kappa_max: int = 512
    p_min: float = 0.1
    p_max: float = 1.0

    def __post_init__(self):
        if self.num_clients < 1:
            raise ConfigError(f"num_clients must be >= 1, got {self.num_clients}")
        if self.num_convs < 1:
            raise ConfigError(f"num_convs must be >= 1, got {self.num_convs}")
        if not 1 <= self.kappa_min <= self.kappa_max:
            raise ConfigError(
                f"kappa range [{self.kappa_min}, {self.kappa_max}] is invalid: need 1 <= kappa_min <= kappa_max"
            )
        if not 0.0 < self.p_min <= self.p_max <= 1.0:
            raise ConfigError(
                f"probability range [{self.p_min}, {self.p_max}] is invalid: need 0 < p_min <= p_max <= 1"
            )

    @property
    def per_client(self) -> int:
        return 1 + self.num_convs

    @property
    def dim(self) -> int:
        return self.num_clients * self.per_client

    def policies(self, action: np.ndarray) -> list[SamplingPolicy]:
        """Every client's policy from an action (clipped to [-1, 1])."""
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (self.dim,):
            raise ValueError(f"action has shape {a.shape}, this action space needs ({self.dim},)")
        u = (np.clip(a, -1.0, 1.0).reshape(self.num_clients, self.per_client) + 1.0) / 2.0
        kappa = np.rint(self.kappa_min + u[:, 0] * (self.kappa_max - self.kappa_min)).astype(int)
        probs = self.p_min + u[:, 1:] * (self.p_max - self.p_min)
        return [SamplingPolicy(kappa=int(k), probs=tuple(float(p) for p in ps)) for k, ps in zip(kappa, probs)]

    def action(self, policies: Sequence[SamplingPolicy]) -> np.ndarray:
        """The action that maps to ``policies`` (the inverse of :meth:`policies`, up to rounding)."""
        if len(policies) != self.num_clients:
            raise ValueError(f"{len(policies)} policies for {self.num_clients} clients")
        rows = []
        for pol in policies:
            pol.check(self.num_convs)
            k = (pol.kappa - self.kappa_min) / max(self.kappa_max - self.kappa_min, 1)
            ps = [(p - self.p_min) / max(self.p_max - self.p_min, 1e-12) for p in pol.probs]
            rows.append([k, *ps])
        return np.clip(np.asarray(rows, dtype=np.float64) * 2.0 - 1.0, -1.0, 1.0).reshape(-1).astype(np.float32)


@dataclass(frozen=True)
class DDPGConfig:
    episode_rounds: int = 30  # T
    pca_components: int = 20
    hidden: tuple[int, int] = (512, 256)
    actor_lr: float = 1e-4
    critic_lr: float = 1e-3
    gamma: float = 0.99
    tau: float = 0.01
    batch_size: int = 64  # K
    buffer_capacity: int = 10_000
    noise_std: float = 0.2
    noise_decay: float = 0.98
    noise_min: float = 0.02
    # TD3 (Fujimoto et al. 2018; not in the paper; off by default: the paper's DDPG): see :data:`UPDATE_RULES`
    twin_critics: bool = False  # two critics; the target takes the smaller of their target values
    policy_delay: int = 1  # the actor and the target networks move every policy_delay-th critic step
    target_noise: float = 0.0  # target policy smoothing: N(0, target_noise^2) on mu~(s'), clipped to +-clip
    target_noise_clip: float = 0.5

    def validate(self) -> None:
        checks = [
            ("episode_rounds", self.episode_rounds >= 1, ">= 1"),
            ("pca_components", self.pca_components >= 1, ">= 1"),
            ("hidden", len(self.hidden) == 2 and all(h >= 1 for h in self.hidden), "two sizes >= 1"),
            ("actor_lr", self.actor_lr > 0, "> 0"),
            ("critic_lr", self.critic_lr > 0, "> 0"),
            ("gamma", 0.0 <= self.gamma <= 1.0, "in [0, 1]"),
            ("tau", 0.0 < self.tau <= 1.0, "in (0, 1]"),
            ("batch_size", self.batch_size >= 1, ">= 1"),
            ("buffer_capacity", self.buffer_capacity >= 1, ">= 1"),
            ("noise_std", self.noise_std >= 0, ">= 0"),
            ("noise_decay", 0.0 < self.noise_decay <= 1.0, "in (0, 1]"),
            ("noise_min", self.noise_min >= 0, ">= 0"),
            ("policy_delay", self.policy_delay >= 1, ">= 1"),
            ("target_noise", self.target_noise >= 0, ">= 0"),
            ("target_noise_clip", self.target_noise_clip >= 0, ">= 0"),
        ]
        for name, ok, rule in checks:
            if not ok:
                raise ConfigError(f"ddpg {name}={getattr(self, name)!r}: must be {rule}")


UPDATE_RULES: dict[str, dict[str, Any]] = {
    "ddpg": {"twin_critics": False, "policy_delay": 1, "target_noise": 0.0},  # the paper's (eq. 10-14)
    # TD3's three changes with its authors' defaults: clipped double Q, delayed actor/target updates (every 2nd
    # step), target policy smoothing (sigma 0.2 clipped to 0.5; actions span [-1, 1] as in their experiments)
    "td3": {"twin_critics": True, "policy_delay": 2, "target_noise": 0.2, "target_noise_clip": 0.5},
}
"""DDPGConfig fields per update rule (``fedgraph.agent-update``)."""


def _mlp(sizes: Sequence[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class Actor(nn.Module):
    def __init__(self, state_dim: int, action_dim: int, hidden: Sequence[int] = (512, 256)):
        super().__init__()
        self.net = _mlp([state_dim, *hidden, action_dim])

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(state))


class Critic(nn.Module):
    def __init__(self, state_dim: int, action_dim: int, hidden: Sequence[int] = (512, 256)):
        super().__init__()
        self.net = _mlp([state_dim + action_dim, *hidden, 1])

    def forward(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([state, action], dim=-1)).squeeze(-1)


@torch.no_grad()
def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """theta~ <- tau theta + (1 - tau) theta~ for every parameter (eq. 13-14)."""
    if not 0.0 < tau <= 1.0:
        raise ConfigError(f"tau={tau!r}: must be in (0, 1]")
    for t, s in zip(target.parameters(), source.parameters(), strict=True):
        t.mul_(1.0 - tau).add_(s, alpha=tau)


class ReplayBuffer:
    """A ring of ``capacity`` transitions (s, a, r, s', done); when full the oldest is overwritten."""

    FIELDS = ("states", "actions", "rewards", "next_states", "dones")

    def __init__(self, capacity: int, state_dim: int, action_dim: int):
        if capacity < 1:
            raise ConfigError(f"replay buffer capacity must be >= 1, got {capacity}")
        self.capacity, self.state_dim, self.action_dim = int(capacity), int(state_dim), int(action_dim)
        self.states = np.zeros((capacity, state_dim), dtype=np.float32)
        self.actions = np.zeros((capacity, action_dim), dtype=np.float32)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.next_states = np.zeros((capacity, state_dim), dtype=np.float32)
        self.dones = np.zeros(capacity, dtype=np.float32)
        self.position = 0  # where the next transition goes
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def add(self, state, action, reward: float, next_state, done: bool) -> None:
        i = self.position
        self.states[i] = np.asarray(state, dtype=np.float32).reshape(self.state_dim)
        self.actions[i] = np.asarray(action, dtype=np.float32).reshape(self.action_dim)
        self.rewards[i] = reward
        self.next_states[i] = np.asarray(next_state, dtype=np.float32).reshape(self.state_dim)
        self.dones[i] = float(done)
        self.position = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample_indices(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """min(batch_size, size) distinct stored slots, uniformly at random."""
        if self.size == 0:
            raise ValueError("the replay buffer is empty")
        return rng.choice(self.size, size=min(int(batch_size), self.size), replace=False)

    def batch(self, indices: np.ndarray) -> tuple[torch.Tensor, ...]:
        return tuple(torch.from_numpy(getattr(self, f)[indices]) for f in self.FIELDS)

    def export_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays = {f: getattr(self, f)[: self.size].copy() for f in self.FIELDS}
        return arrays, {
            "capacity": self.capacity,
            "position": self.position,
            "size": self.size,
            "state_dim": self.state_dim,
            "action_dim": self.action_dim,
        }

    @classmethod
    def from_state(cls, arrays: Mapping[str, np.ndarray], values: Mapping[str, Any]) -> "ReplayBuffer":
        buf = cls(int(values["capacity"]), int(values["state_dim"]), int(values["action_dim"]))
        size = int(values["size"])
        for f in cls.FIELDS:
            value = np.asarray(arrays[f])
            if len(value) != size:
                raise ValueError(f"replay buffer field {f!r} has {len(value)} rows, the header says {size}")
            getattr(buf, f)[:size] = value
        buf.size, buf.position = size, int(values["position"])
        return buf


class WeightPCA:
    """PCA of flattened model weights (see the module docstring for how and when it is fitted)."""

    def __init__(self, n_components: int = 20):
        self.n_components = int(n_components)
        self.names: list[str] | None = None
        self.shapes: list[list[int]] | None = None
        self.mean: np.ndarray | None = None  # float64 [D]
        self.components: np.ndarray | None = None  # float64 [k, D], k <= n_components

    @property
    def fitted(self) -> bool:
        return self.components is not None

    def flatten(self, weights: Mapping[str, np.ndarray]) -> np.ndarray:
        if self.names is None:
            self.names = list(weights)
            self.shapes = [list(np.shape(weights[n])) for n in self.names]
        if sorted(weights) != sorted(self.names):
            raise ValueError(f"weights have arrays {sorted(weights)}; the agent's state uses {sorted(self.names)}")
        parts = []
        for name, shape in zip(self.names, self.shapes or []):
            value = np.asarray(weights[name], dtype=np.float64)
            if list(value.shape) != shape:
                raise ValueError(f"array {name!r} has shape {list(value.shape)}, expected {shape}")
            parts.append(value.reshape(-1))
        return np.concatenate(parts)

    def fit(self, vectors: np.ndarray) -> bool:
        """Fit on the rows of ``vectors``; False (and no fit) when they are all equal."""
        x = np.asarray(vectors, dtype=np.float64)
        mean = x.mean(axis=0)
        _, s, vt = np.linalg.svd(x - mean, full_matrices=False)
        if s.size == 0 or s[0] <= 0:
            return False
        k = int(min(self.n_components, np.sum(s > s[0] * 1e-9)))
        comps = vt[:k]
        signs = np.sign(comps[np.arange(k), np.argmax(np.abs(comps), axis=1)])
        self.mean, self.components = mean, comps * signs[:, None]
        return True

    def transform(self, vectors: np.ndarray) -> np.ndarray:
        """[n, n_components] float32 (zeros where there are fewer fitted axes, all zeros before fitting)."""
        x = np.asarray(vectors, dtype=np.float64)
        out = np.zeros((x.shape[0], self.n_components), dtype=np.float64)
        if self.components is not None and self.mean is not None:
            out[:, : len(self.components)] = (x - self.mean) @ self.components.T
        return out.astype(np.float32)

    def export_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays = {}
        if self.components is not None and self.mean is not None:
            arrays = {"mean": self.mean.copy(), "components": self.components.copy()}
        return arrays, {"n_components": self.n_components, "names": self.names, "shapes": self.shapes}

    @classmethod
    def from_state(cls, arrays: Mapping[str, np.ndarray], values: Mapping[str, Any]) -> "WeightPCA":
        pca = cls(int(values["n_components"]))
        pca.names = None if values.get("names") is None else list(values["names"])
        pca.shapes = None if values.get("shapes") is None else [list(s) for s in values["shapes"]]
        if "components" in arrays:
            pca.mean = np.asarray(arrays["mean"], dtype=np.float64).copy()
            pca.components = np.asarray(arrays["components"], dtype=np.float64).copy()
        return pca


@dataclass
class StepResult:
    action: np.ndarray | None  # a[t], or None at the end of an episode
    done: bool
    critic_loss: float | None
    actor_loss: float | None


def _rng_values(rng: np.random.Generator) -> dict[str, Any]:
    state = rng.bit_generator.state
    return {
        "bit_generator": state["bit_generator"],
        "state": hex(state["state"]["state"]),
        "inc": hex(state["state"]["inc"]),
        "has_uint32": int(state["has_uint32"]),
        "uinteger": int(state["uinteger"]),
    }


def _rng_from_values(values: Mapping[str, Any]) -> np.random.Generator:
    if values.get("bit_generator") != "PCG64":
        raise ValueError(f"unsupported generator {values.get('bit_generator')!r}; expected PCG64")
    rng = np.random.Generator(np.random.PCG64())
    rng.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": int(values["state"], 16), "inc": int(values["inc"], 16)},
        "has_uint32": int(values["has_uint32"]),
        "uinteger": int(values["uinteger"]),
    }
    return rng


class DDPGAgent:
    """The server's GenSampling() (Algorithm 4); see the module docstring."""

    def __init__(self, space: ActionSpace, config: DDPGConfig = DDPGConfig(), seed: int = 0):
        config.validate()
        self.space, self.config, self.seed = space, config, int(seed)
        self.state_dim = config.pca_components * (space.num_clients + 1)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self.actor = Actor(self.state_dim, space.dim, config.hidden)
            self.critic = Critic(self.state_dim, space.dim, config.hidden)
            self.critic2 = Critic(self.state_dim, space.dim, config.hidden) if config.twin_critics else None
        self.actor_target = copy.deepcopy(self.actor)
        self.critic_target = copy.deepcopy(self.critic)
        self.critic2_target = copy.deepcopy(self.critic2)
        for name in self.nets:
            if name.endswith("_target"):
                for p in getattr(self, name).parameters():
                    p.requires_grad_(False)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=config.actor_lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=config.critic_lr)
        self.critic2_opt = (
            None if self.critic2 is None else torch.optim.Adam(self.critic2.parameters(), lr=config.critic_lr)
        )
        self.buffer = ReplayBuffer(config.buffer_capacity, self.state_dim, space.dim)
        self.rng = np.random.default_rng(np.random.SeedSequence([self.seed, 0xDD9C]))
        self.pca = WeightPCA(config.pca_components)
        self.noise_std = float(config.noise_std)
        self.episode = 0  # episodes started
        self.round = 0  # rounds recorded in the current episode
        self.updates = 0
        self.last_state: np.ndarray | None = None
        self.last_action: np.ndarray | None = None

    # --- state, action ---------------------------------------------------------------------------------------
    def observe(
        self, global_weights: Mapping[str, np.ndarray], client_weights: Sequence[Mapping[str, np.ndarray]]
    ) -> np.ndarray:
        """s'[t] = PCA(W_bar, W_1, ..., W_|C|) (fits the PCA the first time the models differ)."""
        if len(client_weights) != self.space.num_clients:
            raise ValueError(
                f"{len(client_weights)} client models; the agent was built for {self.space.num_clients} clients"
            )
        vectors = np.stack([self.pca.flatten(global_weights)] + [self.pca.flatten(w) for w in client_weights])
        if not self.pca.fitted:
            self.pca.fit(vectors)
        return self.pca.transform(vectors).reshape(-1)

    def act(self, state: np.ndarray, explore: bool = True) -> np.ndarray:
        """mu(s) (+ Gaussian noise when ``explore``), clipped to [-1, 1], float32."""
        s = torch.as_tensor(np.asarray(state, dtype=np.float32).reshape(1, self.state_dim))
        with torch.no_grad():
            a = self.actor(s)[0].numpy().astype(np.float64)
        if explore and self.noise_std > 0:
            a = a + self.rng.normal(0.0, self.noise_std, size=a.shape)
        return np.clip(a, -1.0, 1.0).astype(np.float32)

    def policies(self, action: np.ndarray) -> list[SamplingPolicy]:
        return self.space.policies(action)

    # --- Algorithm 4 -----------------------------------------------------------------------------------------
    def start_episode(self, state: np.ndarray) -> np.ndarray:
        """Begin an episode at s'[0]; returns a[0] (with exploration noise)."""
        self.episode += 1
        self.round = 0
        self.last_state = np.asarray(state, dtype=np.float32).reshape(self.state_dim).copy()
        self.last_action = self.act(self.last_state)
        return self.last_action.copy()

    def record(self, reward: float, next_state: np.ndarray) -> StepResult:
        """After round t: store (s'[t-1], a[t-1], r[t-1], s'[t]), update, and return a[t] (None after round T)."""
        if self.last_state is None or self.last_action is None:
            raise RuntimeError("record() before start_episode(): no previous state and action")
        next_state = np.asarray(next_state, dtype=np.float32).reshape(self.state_dim)
        self.round += 1
        done = self.round >= self.config.episode_rounds
        self.buffer.add(self.last_state, self.last_action, float(reward), next_state, done)
        losses = self.update()
        if done:
            self.last_state = self.last_action = None
            self.noise_std = max(self.config.noise_min, self.noise_std * self.config.noise_decay)
            action = None
        else:
            self.last_state = next_state.copy()
            self.last_action = self.act(self.last_state)
            action = self.last_action.copy()
        return StepResult(
            action=action,
            done=done,
            critic_loss=None if losses is None else losses[0],
            actor_loss=None if losses is None else losses[1],
        )

    def update(self) -> tuple[float, float | None] | None:
        """One critic step from a mini-batch and, every ``policy_delay``-th step, one actor step and the soft target
        updates; None when the buffer is empty. Returns (critic loss, actor loss or None where the actor did not
        move). With twin critics both step on the same target, min of the two target critics' values (TD3), and
        the loss returned is the first critic's; the actor follows the first critic."""
        cfg = self.config
        if len(self.buffer) == 0:
            return None
        s, a, r, s2, d = self.buffer.batch(self.buffer.sample_indices(cfg.batch_size, self.rng))
        with torch.no_grad():
            a2 = self.actor_target(s2)
            if cfg.target_noise > 0:  # drawn from the agent's own generator: exported, so restores are exact
                eps = self.rng.normal(0.0, cfg.target_noise, size=tuple(a2.shape))
                a2 = (
                    a2 + torch.from_numpy(np.clip(eps, -cfg.target_noise_clip, cfg.target_noise_clip)).to(a2.dtype)
                ).clamp(-1.0, 1.0)
            q2 = self.critic_target(s2, a2)
            if self.critic2_target is not None:
                q2 = torch.minimum(q2, self.critic2_target(s2, a2))
            target = r + cfg.gamma * (1.0 - d) * q2
        critic_loss = F.mse_loss(self.critic(s, a), target)
        self.critic_opt.zero_grad()
        critic_loss.backward()
        self.critic_opt.step()
        if self.critic2 is not None and self.critic2_opt is not None:
            critic2_loss = F.mse_loss(self.critic2(s, a), target)
            self.critic2_opt.zero_grad()
            critic2_loss.backward()
            self.critic2_opt.step()
        self.updates += 1
        if self.updates % cfg.policy_delay:
            return float(critic_loss.detach()), None
        actor_loss = -self.critic(s, self.actor(s)).mean()
        self.actor_opt.zero_grad()
        actor_loss.backward()
        self.actor_opt.step()
        self.critic_opt.zero_grad()  # the actor's step left gradients on the critic
        soft_update(self.actor_target, self.actor, cfg.tau)
        soft_update(self.critic_target, self.critic, cfg.tau)
        if self.critic2 is not None and self.critic2_target is not None:
            soft_update(self.critic2_target, self.critic2, cfg.tau)
        return float(critic_loss.detach()), float(actor_loss.detach())

    # --- export / import ---------------------------------------------------------------------------------
    NETS = ("actor", "critic", "actor_target", "critic_target")
    OPTS = ("actor_opt", "critic_opt")
    TWIN_NETS = ("critic2", "critic2_target")  # with twin critics (TD3) only
    TWIN_OPTS = ("critic2_opt",)

    @property
    def nets(self) -> tuple[str, ...]:
        """The names of this agent's networks (the second critic and its target with ``twin_critics``)."""
        return self.NETS + (self.TWIN_NETS if self.config.twin_critics else ())

    @property
    def opts(self) -> tuple[str, ...]:
        return self.OPTS + (self.TWIN_OPTS if self.config.twin_critics else ())

    def export_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """(named arrays, JSON values) holding everything the agent will ever use."""
        arrays: dict[str, np.ndarray] = {}
        values: dict[str, Any] = {
            "space": asdict(self.space),
            "config": {**asdict(self.config), "hidden": list(self.config.hidden)},
            "seed": self.seed,
            "rng": _rng_values(self.rng),
            "noise_std": self.noise_std,
            "episode": self.episode,
            "round": self.round,
            "updates": self.updates,
        }
        for name in self.nets:
            arrays.update({f"{name}.{k}": v for k, v in module_arrays(getattr(self, name)).items()})
        for name in self.opts:
            opt_arrays, values[name] = optimizer_state(getattr(self, name))
            arrays.update({f"{name}.{k}": v for k, v in opt_arrays.items()})
        buf_arrays, values["buffer"] = self.buffer.export_state()
        arrays.update({f"buffer.{k}": v for k, v in buf_arrays.items()})
        pca_arrays, values["pca"] = self.pca.export_state()
        arrays.update({f"pca.{k}": v for k, v in pca_arrays.items()})
        for name in ("last_state", "last_action"):
            if getattr(self, name) is not None:
                arrays[name] = getattr(self, name).copy()
        return arrays, values

    @classmethod
    def from_state(cls, arrays: Mapping[str, np.ndarray], values: Mapping[str, Any]) -> "DDPGAgent":
        """The agent :meth:`export_state` described (ValueError/KeyError name what does not fit)."""
        config = dict(values["config"])
        config["hidden"] = tuple(config["hidden"])
        agent = cls(ActionSpace(**values["space"]), DDPGConfig(**config), seed=int(values["seed"]))

        def part(prefix: str) -> dict[str, np.ndarray]:
            return {k[len(prefix) + 1 :]: v for k, v in arrays.items() if k.startswith(prefix + ".")}

        for name in agent.nets:
            net = getattr(agent, name)
            saved = part(name)
            if sorted(saved) != sorted(net.state_dict()):
                raise ValueError(f"saved {name} has entries {sorted(saved)}, the network {sorted(net.state_dict())}")
            load_module_arrays(net, saved)
        for name in agent.opts:
            load_optimizer_state(getattr(agent, name), part(name), values[name])
        agent.buffer = ReplayBuffer.from_state(part("buffer"), values["buffer"])
        agent.pca = WeightPCA.from_state(part("pca"), values["pca"])
        agent.rng = _rng_from_values(values["rng"])
        agent.noise_std = float(values["noise_std"])
        agent.episode, agent.round, agent.updates = int(values["episode"]), int(values["round"]), int(values["updates"])
        for name in ("last_state", "last_action"):
            setattr(agent, name, np.asarray(arrays[name], dtype=np.float32).copy() if name in arrays else None)
        return agent
