"""The ClientApp: run config + node config -> the method's client (looked up in the method registry), answering
Flower's legacy messages through :mod:`flowergraph.app.legacy` and Message-API messages through the handlers.

Node identity comes from the node configuration: ``partition-id`` and ``num-partitions`` (simulation sets both; in
deployment pass them with ``flower-supernode --node-config``). In simulation, ``client-order`` may give node k
another client than client k (:func:`client_schedule`); a deployment ignores it. A SuperNode may also name its own
data, keys and state folder there: node-config keys ``data-dir``, ``dataset``, ``key-file``, ``state-dir`` and
``partition-dir`` override the run configuration for that node, and ``partition-file`` names the data owner's own
partition file (``python -m flowergraph.partition export``): the node then reads only that file, never the global
dataset. Any other node-config key is refused.

Bad input (node config, run config, a missing or corrupt data folder, partition file or key file) is checked
when the client is built, before it trains; the error is re-raised with ``CONFIG_ERROR_MARKER`` in front, which
makes the strategy fail the run with that message (a transient fault only drops the client from a round).

Every client is wrapped, innermost first: to answer flowergraph's client-checkpoint phases
(:class:`flowergraph.clients.base.StateCheckpoints`, writing to ``state-dir``); with ``dp=central-client`` or
``dp=local``, to clip (and noise) its update (:class:`flowergraph.clients.privacy.DPUpdates`); with
``inject-faults``, to misbehave as planned (:class:`flowergraph.clients.faults.FaultInjectingClient`: an attacker
skips the DP step but its poison still goes through secure aggregation); with ``secure-agg``, to weigh (SecAgg+)
or encrypt (CKKS) its update (:class:`flowergraph.clients.secure.SecureUpdates`). The app's one mod,
:func:`privacy_mod`, is Flower's ``secaggplus_mod`` when the run has ``secure-agg=secagg+`` and does nothing
otherwise.

Deployment: Flower starts a fresh ``flwr-clientapp`` process for every message; :func:`node_mod` hands each
message to the node's warm worker process (:mod:`flowergraph.app.worker`), which runs :data:`local_app` with the
imports and the node's data already loaded, so a message pays Flower's own process start and not ours. This module
imports only Flower at import time: everything else is imported when a message needs it.
"""

from __future__ import annotations

import time

_MODULE_T0 = time.time()  # when Flower started to import the ClientApp (message timing, flowergraph.app.timing)


from flwr.app import Context  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402

from .message_client import face_mod  # noqa: E402  (one ClientApp serves both faces)
from .node_client import client_fn, tidy_mod  # noqa: E402


def privacy_mod(msg, context: Context, call_next):
    """Flower's ``secaggplus_mod`` for runs with ``secure-agg=secagg+`` (it fails any training message that does
    not come through ``SecAggPlusWorkflow``, so it cannot be on for other runs); a pass-through otherwise."""
    if str(context.run_config.get("secure-agg", "none")) == "secagg+":
        from .legacy import secaggplus_mod  # the legacy stack's (Flower 1.42 has SecAgg+ only there)

        return secaggplus_mod(msg, context, call_next)
    return call_next(msg, context)


def node_mod(msg, context: Context, call_next):
    """In deployment, run the message in the node's warm worker (:mod:`flowergraph.app.worker`; here when there
    is none); with ``FLOWERGRAPH_MESSAGE_TIMES`` set, record where the message's time went
    (:mod:`flowergraph.app.timing`)."""
    from . import worker

    return worker.run_message(
        msg, context, "flowergraph.app.client_app:local_app", call_next, label="flowergraph", module_t0=_MODULE_T0
    )


# what runs a message (here or in the worker)
local_app = ClientApp(client_fn=client_fn, mods=[tidy_mod, face_mod, privacy_mod])
app = ClientApp(client_fn=client_fn, mods=[node_mod, tidy_mod, face_mod, privacy_mod])
