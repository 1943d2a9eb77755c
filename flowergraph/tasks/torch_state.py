"""Torch modules, optimizers and random generators as plain numpy arrays plus JSON values (Flower-free).

Flower re-creates a client for every message, so whatever a client must remember between rounds (personalised
layers, Adam's moment estimates, a random generator) has to be stored as data in the node's ``context.state``
and loaded into fresh objects. These functions turn the objects into ``(arrays, values)`` pairs with no pickle
anywhere, and back, exactly: a restored optimizer's next step equals the uninterrupted one's bit for bit.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch
from torch import nn


def module_arrays(module: nn.Module, keys: list[str] | None = None) -> dict[str, np.ndarray]:
    """The module's ``state_dict`` entries (all, or ``keys``) as numpy copies, by name."""
    state = module.state_dict()
    names = list(state) if keys is None else keys
    missing = [k for k in names if k not in state]
    if missing:
        raise KeyError(f"the module has no state entries {missing}; it has {list(state)}")
    return {k: state[k].detach().cpu().numpy().copy() for k in names}


def load_module_arrays(module: nn.Module, arrays: Mapping[str, np.ndarray]) -> None:
    """Copy ``arrays`` into the module's own parameters and buffers (by name; the rest is left as is).

    ValueError names an unknown entry or a shape that does not fit. The values are copied *into* the existing
    tensors, so optimizers that hold them keep working."""
    state = module.state_dict()
    for name, value in arrays.items():
        if name not in state:
            raise ValueError(f"the module has no entry {name!r}; it has {', '.join(state)}")
        value = np.asarray(value)
        if tuple(value.shape) != tuple(state[name].shape):
            raise ValueError(f"entry {name!r} has shape {tuple(state[name].shape)}, got {tuple(value.shape)}")
    with torch.no_grad():
        for name, value in arrays.items():
            state[name].copy_(torch.from_numpy(np.ascontiguousarray(value)).to(state[name].dtype))


def optimizer_state(optimizer: torch.optim.Optimizer) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``optimizer.state_dict()`` as (arrays named ``state.<param index>.<name>``, JSON values)."""
    sd = optimizer.state_dict()
    arrays: dict[str, np.ndarray] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for index, entry in sd["state"].items():
        for name, value in entry.items():
            if isinstance(value, torch.Tensor):
                arrays[f"state.{index}.{name}"] = value.detach().cpu().numpy().copy()
            else:
                scalars.setdefault(str(index), {})[name] = value
    groups = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()} for g in sd["param_groups"]]
    tensor_dtypes = {k: str(v.dtype) for k, v in _tensors(sd).items()}
    return arrays, {"param_groups": groups, "scalars": scalars, "dtypes": tensor_dtypes}


def _tensors(sd) -> dict[str, torch.Tensor]:
    return {f"state.{i}.{n}": v for i, e in sd["state"].items() for n, v in e.items() if isinstance(v, torch.Tensor)}


def load_optimizer_state(
    optimizer: torch.optim.Optimizer, arrays: Mapping[str, np.ndarray], values: Mapping[str, Any]
) -> None:
    """Restore what :func:`optimizer_state` returned into ``optimizer`` (built over the same parameters)."""
    state: dict[int, dict[str, Any]] = {}
    dtypes = values.get("dtypes", {})
    for key, value in arrays.items():
        _, index, name = key.split(".", 2)
        tensor = torch.from_numpy(np.array(value))
        if key in dtypes:
            tensor = tensor.to(getattr(torch, dtypes[key].replace("torch.", "")))
        state.setdefault(int(index), {})[name] = tensor
    for index, entry in values.get("scalars", {}).items():
        state.setdefault(int(index), {}).update(entry)
    groups = [dict(g) for g in values["param_groups"]]
    if len(groups) != len(optimizer.param_groups):
        raise ValueError(
            f"saved optimizer state has {len(groups)} parameter groups, the optimizer {len(optimizer.param_groups)}"
        )
    for saved, live in zip(groups, optimizer.param_groups):
        if len(saved["params"]) != len(live["params"]):
            raise ValueError(
                f"saved optimizer state covers {len(saved['params'])} parameters, the optimizer {len(live['params'])}"
            )
        for k, v in list(saved.items()):  # restore tuple-valued hyper-parameters (betas) as the optimizer has them
            if isinstance(live.get(k), tuple) and isinstance(v, list):
                saved[k] = tuple(v)
    optimizer.load_state_dict({"state": state, "param_groups": groups})


def rng_state(generator: torch.Generator | None = None) -> np.ndarray:
    """A torch generator's state (the global one by default) as a uint8 array."""
    state = generator.get_state() if generator is not None else torch.get_rng_state()
    return state.numpy().copy()


def set_rng_state(state: np.ndarray, generator: torch.Generator | None = None) -> None:
    tensor = torch.from_numpy(np.asarray(state, dtype=np.uint8).copy())
    if generator is not None:
        generator.set_state(tensor)
    else:
        torch.set_rng_state(tensor)
