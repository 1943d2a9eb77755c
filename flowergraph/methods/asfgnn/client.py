"""ASFGNN client (Zheng et al.): one data owner's private SGNN and its copy of the federated discriminator (FGNN).

The wire protocol and what the server learns are in :mod:`flowergraph.methods.asfgnn.server`; the keys and messages in
:mod:`flowergraph.methods.asfgnn.wire`; the networks, the JS mixing and the local round in
:mod:`flowergraph.methods.asfgnn.maths`.

What the client keeps between messages (its persistent state, :class:`~flowergraph.clients.ClientState` over
``context.state``; Flower re-creates the client for every message; client checkpoints save it): its whole model as
trained in its last round (``asfgnn-model``: SGNN and its own discriminator ``W_i``; the SGNN never leaves the
client), its Adam optimizer (``asfgnn-adam``, so the moments carry across rounds) and the trial they belong to
(``asfgnn-trial``: the trial index and the hyper-parameters).

Each ``fit`` (one round of one trial, :class:`~flowergraph.methods.asfgnn.wire.TrialInstruction` in its config):

1. build the model for this client's hyper-parameters (its SGNN seeded per client, as the reference loops do);
   if the state holds this trial's model, load it and Adam; otherwise (a new trial: new hyper-parameters) start
   fresh and, in the trial's first round, take the server's initial shared part (SFGNN with ``fgnn_init="shared"``:
   one discriminator for all; FL: one whole model for all);
2. from the trial's second round on, take the server's aggregate: SFGNN mixes its own discriminator with it,
   ``W_i <- js W_i + (1 - js) W_s``, ``js = JS(Q_i || Q_s)`` with ``Q_s`` from the global label counts ``N_s``
   the server sent (or replaces it, ``use_js=False``); FL takes the whole averaged model; SP and CM take nothing;
3. evaluate the model as it entered the round, then (training rounds) one local round of Eq. 4 with the dropout
   generator of ``(seed, client, round of the trial)``; store the model and Adam;
4. reply with the shared part after training (SFGNN: ``fgnn.*``; FL: everything; SP/CM: nothing) and the
   statistics arrays (label counts, the entry metrics), scaled by the update's weight.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ... import wire
from .maths.data import ClientData
from .maths.divergence import js_divergence, label_distribution, mix_arrays
from .maths.models import SFGNN, all_arrays, fgnn_arrays, load_all_arrays, load_fgnn_arrays
from .maths.training import (
    DEFAULT_LOCAL_EPOCHS,
    HyperParams,
    derive_seed,
    evaluate,
    local_round,
    make_model,
    make_optimizer,
    predict,
    round_generator,
)
from ...wire import PhaseRequest
from . import wire as aw
from ...clients.base import FederatedClient
from ...clients.state import ClientState

MODEL_KEY, OPTIMIZER_KEY, TRIAL_KEY = "asfgnn-model", "asfgnn-adam", "asfgnn-trial"
SHARES = ("fgnn", "all", "none")  # what travels: the discriminator (SFGNN), the whole model (FL), nothing (SP, CM)
FGNN_INITS = ("shared", "client")
MODEL_SEED_TAG = 0x1417  # the reference loops' model seeds: derive_seed(seed, 0x1417, client)


class ASFGNNClient(FederatedClient):
    """One data owner (see the module docstring).

    ``share``: ``fgnn`` (SFGNN), ``all`` (FL) or ``none`` (SP, CM); ``use_js``: SFGNN mixes with the JS weight
    (False: takes the server's discriminator as it is); ``fgnn_init``: ``shared`` (the trial starts from the
    server's discriminator) or ``client`` (each client keeps its own initial one); ``weighting``: how the server
    weighs updates (``train-size`` or ``uniform``: the statistics are divided by the update's weight so the server
    recovers plain sums); ``model_index``: the index the initial model is seeded with (default the partition id; FL
    and CM use 0); ``generator_client``: the index of the dropout generator (default the partition id; CM -1).
    """

    def __init__(
        self,
        data: ClientData,
        *,
        partition_id: int,
        share: str = "fgnn",
        use_js: bool = True,
        fgnn_init: str = "shared",
        seed: int = 0,
        state: ClientState | None = None,
        local_epochs: int = DEFAULT_LOCAL_EPOCHS,
        weighting: str = "uniform",
        model_index: int | None = None,
        generator_client: int | None = None,
    ) -> None:
        if share not in SHARES:
            raise ValueError(f"unknown ASFGNN share {share!r}; valid choices: {', '.join(SHARES)}")
        if fgnn_init not in FGNN_INITS:
            raise ValueError(f"unknown fgnn_init {fgnn_init!r}; valid choices: {', '.join(FGNN_INITS)}")
        if weighting not in ("train-size", "uniform"):
            raise ValueError(f"weighting {weighting!r} is not supported by ASFGNN; valid: train-size, uniform")
        self.data = data
        self.partition_id = int(partition_id)
        self.share = share
        self.use_js = bool(use_js)
        self.fgnn_init = fgnn_init
        self.seed = int(seed)
        self.state = state if state is not None else ClientState()
        self.local_epochs = int(local_epochs)
        self.weighting = weighting
        self.model_index = self.partition_id if model_index is None else int(model_index)
        self.generator_client = self.partition_id if generator_client is None else int(generator_client)
        self.counts = data.train_label_counts()
        self.model: SFGNN | None = None
        self.optimizer: Any = None
        self.instruction: aw.TrialInstruction | None = None
        self.hp: HyperParams | None = None
        self.keys: list[str] = []
        self.statistics: dict[str, np.ndarray] = {}
        self.mixing: dict[str, float] = {}

    # --------------------------------------------------------------------------------------------- helpers
    def build(self, hp: HyperParams) -> SFGNN:
        """The seeded initial model for ``hp`` (the same weights the reference loops start from)."""
        return make_model(self.data, hp, derive_seed(self.seed, MODEL_SEED_TAG, self.model_index))

    def shared_part(self, model: SFGNN) -> dict[str, np.ndarray]:
        if self.share == "fgnn":
            return fgnn_arrays(model)
        if self.share == "all":
            return all_arrays(model)
        return {}

    def phase_handlers(self):
        return {aw.INIT: self._init}

    def _init(self, request: PhaseRequest):
        """A trial starts: this client's seeded initial shared part for the trial's hyper-parameters."""
        ask = aw.InitRequest.decode(request.values)
        model = self.build(HyperParams(**dict(ask.hyperparams)))
        return aw.InitReply(self.shared_part(model), self.data.num_classes).encode()

    # ------------------------------------------------------------------------------------------------ wire
    def load(self, arrays, keys, config) -> None:
        if keys is None:
            raise ValueError("an ASFGNN fit message names its arrays (fg.keys); this one does not")
        if aw.TRIAL not in config:
            raise ValueError(
                "ASFGNN evaluates inside its fit messages (the server sends no evaluate message); "
                "this message carries no trial instruction"
            )
        inst = aw.TrialInstruction.decode(config)
        hp = HyperParams(**dict(inst.hyperparams))
        received = dict(zip(keys, arrays))
        self.instruction, self.hp, self.keys = inst, hp, list(keys)
        model = self.build(hp)
        optimizer = make_optimizer(model, hp)
        stored = self.state.get_values(TRIAL_KEY)
        same_trial = stored is not None and int(stored["trial"]) == inst.trial and stored["hp"] == hp.to_dict()
        if same_trial:
            self.state.load_module(MODEL_KEY, model)
            self.state.load_optimizer(OPTIMIZER_KEY, optimizer)
        model_part = {k: v for k, v in received.items() if k not in aw.STAT_NAMES}
        if not same_trial and inst.trial_round == 1:  # a new trial: the server's initial shared part
            if self.share == "fgnn" and self.fgnn_init == "shared":
                load_fgnn_arrays(model, model_part)
            elif self.share == "all":
                load_all_arrays(model, model_part)
        else:  # the server's aggregate of the previous round
            n_s = aw.global_counts(received)
            if self.share == "fgnn" and n_s.sum() > 0:
                js = js_divergence(label_distribution(self.counts), label_distribution(n_s))
                load_fgnn_arrays(model, mix_arrays(fgnn_arrays(model), model_part, js, use_js=self.use_js))
                self.mixing = {"js": js}
            elif self.share == "all" and n_s.sum() > 0:
                load_all_arrays(model, model_part)
        self.model, self.optimizer = model, optimizer

    def train(self, config) -> tuple[int, dict]:
        assert self.model is not None and self.instruction is not None and self.hp is not None
        inst, data = self.instruction, self.data
        owner = self._owner_means() if data.owner is not None else {}
        if inst.train:
            r = local_round(
                self.model,
                self.optimizer,
                data,
                self.hp,
                epochs=self.local_epochs,
                generator=round_generator(self.seed, self.generator_client, inst.trial_round),
            )
            result: dict[str, Any] = {
                "val_accuracy": r.val_acc,
                "accuracy": r.test_acc,
                "train_accuracy": r.train_acc,
                "train_loss": r.train_loss,
            }
            self.state.save_module(MODEL_KEY, self.model)
            self.state.save_optimizer(OPTIMIZER_KEY, self.optimizer)
            self.state.set_values(TRIAL_KEY, {"trial": inst.trial, "hp": self.hp.to_dict()})
        else:  # the trial's closing round: the final model, evaluated only
            m = evaluate(self.model, data)
            result = {"val_accuracy": m.val_acc, "accuracy": m.test_acc, "train_accuracy": m.train_acc}
        result.update(num_val=data.num_val, num_test=data.num_test, num_train=data.num_train, **owner)
        stats = aw.Statistics(self.counts, aw.metric_values(result))
        num_examples = data.num_train if self.share == "all" else 1
        weight = 1.0 if self.weighting == "uniform" else float(num_examples)
        self.statistics = stats.encode(weight)
        return num_examples, {}  # nothing in clear: the statistics travel with the (secured) update

    def _owner_means(self) -> dict[str, float]:
        """CM: the mean over the data owners of the accuracy on their validation / test nodes (the model as it
        entered the round)."""
        data = self.data
        assert self.model is not None and data.owner is not None
        correct = (predict(self.model, data) == data.y).numpy()
        owner = data.owner.numpy()
        out = {}
        for key, mask in (("owner_mean_val", data.val_mask.numpy()), ("owner_mean_test", data.test_mask.numpy())):
            accs = [
                float(correct[mask & (owner == i)].mean())
                for i in range(data.num_clients)
                if (mask & (owner == i)).any()
            ]
            out[key] = float(np.mean(accs)) if accs else float("nan")
        return out

    def shared_arrays(self) -> Mapping[str, np.ndarray]:
        """The names the server sent, in its order: the shared part after training and the statistics."""
        assert self.model is not None
        part = self.shared_part(self.model)
        out = {}
        for key in self.keys:
            if key in self.statistics:
                out[key] = self.statistics[key]
            elif key in part:
                out[key] = part[key]
            else:
                raise ValueError(
                    f"the server sent array {key!r}, which this client does not share (share="
                    f"{self.share!r}: {', '.join(part) or 'none'})"
                )
        return out

    def evaluation(self) -> dict:
        assert self.model is not None
        m = evaluate(self.model, self.data)
        return {
            wire.ACCURACY: m.test_acc,
            wire.NUM_TEST: self.data.num_test,
            wire.VAL_ACCURACY: m.val_acc,
            wire.NUM_VAL: self.data.num_val,
        }
