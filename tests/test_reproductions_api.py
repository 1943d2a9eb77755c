"""The reproductions (reproductions/) use flowergraph's public API only (issue 93): the method classes
(``flowergraph.serverapp``), the launcher (``flowergraph.simulation``), ``flowergraph.data``, ``flowergraph.storage``,
the registry's option dataclasses (``flowergraph.methods``), the settings (``flowergraph.settings``: presets and
run configurations) and ``flowergraph.plot``, each imported from the package's top module, never from the modules
behind it. An import of anything else from flowergraph fails here, naming the file, the line and the import.

What a reproduction still needs from the package's insides is listed in ``INTERNAL``, each with the reason there is
no public way yet: the list can only shrink (an entry no file uses any more fails too), and a new internal import
fails until it is exposed publicly or listed with its reason. The same holds for the library's benchmarks
(``benchmarks/``): a reproduction imports none of them unless listed."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PUBLIC = {
    "flowergraph",
    "flowergraph.serverapp",
    "flowergraph.simulation",
    "flowergraph.data",
    "flowergraph.storage",
    "flowergraph.methods",
    "flowergraph.settings",
    "flowergraph.plot",
}
# (file under reproductions/, module imported) -> why there is no public way yet. Empty is the goal.
_INPROCESS = (
    "a cell is one federated run through the real ServerApp and ClientApp code in this process (run_inprocess); "
    "the launcher's inline engine (flowergraph.simulation) runs it in a child process through Flower's serde, equal "
    "to 1e-6 but not to the last digit the stored cells record; to expose: an in-process run in flowergraph.simulation"
)
_TORCH = (
    "torch set as the Flower apps set it (configure_torch: one thread, denormals flushed as the run's flag says); "
    "no public function sets it"
)
_NOOP = "the no-op floor (fedstar-noop) is the benchmarks' method plugin, benchmarks/noop_methods.py"
INTERNAL: dict[tuple[str, str], str] = {
    ("reproductions/_runner/common.py", "flowergraph.tasks.compute"): _TORCH,
    ("reproductions/fedstar/grid.py", "flowergraph.app.inprocess"): _INPROCESS,
    ("reproductions/asfgnn/compute.py", "flowergraph.app.inprocess"): _INPROCESS,
    ("reproductions/asfgnn/run.py", "flowergraph.tasks.compute"): _TORCH,
    ("reproductions/flagcns/compute.py", "flowergraph.app.inprocess"): _INPROCESS,
    ("reproductions/flagcns/compute.py", "benchmarks"): _NOOP,
    ("reproductions/flagcns/run.py", "flowergraph.tasks.compute"): _TORCH,
    ("reproductions/flagcns/core_check.py", "flowergraph.tasks.compute"): _TORCH,
    ("reproductions/flagcns/compute.py", "flowergraph.methods.flagcns"): "a run's search space from its settings "
    "(space_of, the method registration's helper): flowergraph.methods does not export it",
    **{
        ("reproductions/flagcns/compute.py", module): "the controls retrain architectures with the Flower-free "
        "core's federated training (FL-Random, the fixed and the authors' networks, the published architectures, "
        "each activation, the final population) and time their inference: the core's own functions"
        for module in ("flowergraph.tasks.flagcns", "flowergraph.tasks.torch_state")
    },
    **{
        ("reproductions/flagcns/controls.py", module): "the control tables name genes by the core's activations "
        "and search space, and pick the finalists as the search does (evolution.final_candidates)"
        for module in ("flowergraph.tasks.flagcns", "flowergraph.tasks.flagcns.evolution")
    },
    ("reproductions/flagcns/core_check.py", "flowergraph.tasks.flagcns"): "times the Flower-free core's pieces "
    "(a SuperNet step, a population's evaluation, Algorithm 2 in one process) to choose the search's defaults",
    ("reproductions/fedgraph/grid.py", "flowergraph.app.inprocess"): _INPROCESS,
    ("reproductions/fedgraph/acceptance.py", "flowergraph.app.inprocess"): _INPROCESS,
    ("reproductions/fedgraph/run.py", "flowergraph.tasks.compute"): _TORCH,
    ("reproductions/fedgraph/acceptance.py", "flowergraph.tasks.compute"): _TORCH,
    ("reproductions/fedgraph/clock.py", "flowergraph.tasks.compute"): _TORCH,
    ("reproductions/fedgraph/core_check.py", "flowergraph.tasks.compute"): _TORCH,
    **{
        (f"reproductions/fedgraph/{file}.py", "flowergraph.methods.fedgraph"): "a client's graph under FedGraph's "
        "data schemes (client_graph_of: synthesis, METIS or random parts per client), the method registration's "
        "helper: flowergraph.methods and flowergraph.data do not export it"
        for file in ("grid", "acceptance", "clock")
    },
    ("reproductions/fedgraph/acceptance.py", "flowergraph.tasks.fedgraph"): "the parallel clock's network "
    "profiles (NETWORKS) the acceptance tables name: the core's constants",
    **{
        ("reproductions/fedgraph/grid.py", module): "the FastGCN layer-size control trains client 0 alone with the "
        "Flower-free core (no sharing, no Flower): the core's own functions"
        for module in ("flowergraph.tasks.fedgraph", "flowergraph.tasks.fedgraph.local")
    },
    **{
        ("reproductions/fedgraph/clock.py", module): "calibrates the parallel clock's constants (seconds per MAC, "
        "per row, per step) by timing the core's training steps and exchange: the core's own functions"
        for module in ("flowergraph.tasks.fedgraph", "flowergraph.tasks.fedgraph.local", "flowergraph.tasks.training")
    },
    **{
        ("reproductions/fedgraph/core_check.py", module): "checks the Flower-free FedGraph core itself (round "
        "times, the DDPG update, centralised and in-process federated sanity): the core's own functions"
        for module in (
            "flowergraph.tasks.fedgraph",
            "flowergraph.tasks.fedgraph.model",
            "flowergraph.tasks.torch_state",
            "flowergraph.tasks.training",
        )
    },
    **{
        (f"reproductions/fedgcn/{file}.py", "flowergraph.privacy.ckks"): "the CKKS ring dimension "
        "(POLY_MODULUS_DEGREE) the pages state and count ciphertext slots by: no public constant"
        for file in ("he", "scale")
    },
    ("reproductions/fedgcn/vs_fedgraph.py", "flowergraph.app.runtime"): "stops the fedgraph library's Ray "
    "processes by PID (kill_tree, stop_processes): app.runtime is listed public in docs/architecture.md, but is "
    "not one of the modules a reproduction may use",
    **{
        ("reproductions/asfgnn/parking.py", module): "parking keeps a checkpoint's strategy state as JSON, with the "
        "checkpoint format's own tree packing (npzio.pack_tree / unpack_tree) and the newest checkpoint of a folder "
        "(checkpoint.find_checkpoint, round_of_file, errors.CheckpointError): flowergraph.storage exports neither"
        for module in ("flowergraph.storage.npzio", "flowergraph.storage.checkpoint", "flowergraph.errors")
    },
    **{
        ("reproductions/asfgnn/core_check.py", module): "checks the Flower-free ASFGNN core itself at Table 4's "
        "hyper-parameters, through the reference loops the library's tests hold the Flower run to"
        for module in (
            "flowergraph.tasks.asfgnn.data",
            "flowergraph.tasks.asfgnn.reference",
            "flowergraph.tasks.asfgnn.training",
        )
    },
    ("reproductions/fedstar/speed.py", "benchmarks"): _NOOP,
    ("reproductions/fedstar/embeddings.py", "flowergraph.tasks.compute"): _TORCH,
    **{
        ("reproductions/fedstar/embeddings.py", module): "times the core's structure embeddings on each raw TU "
        "dataset: loading one dataset whole and computing its encodings have no public entry (client_graph_data "
        "computes them inside a client's split)"
        for module in (
            "flowergraph.tasks.datasets",
            "flowergraph.tasks.graphcls.data",
            "flowergraph.tasks.graphcls.structure",
        )
    },
}


def _imports(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, the import as written) of every import of flowergraph or benchmarks in ``path``, at any depth
    (imports inside functions included); ``from flowergraph import x`` counts as module ``flowergraph.x`` where x
    is a submodule."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, f"import {a.name}") for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = ", ".join(a.name for a in node.names)
            written = f"from {node.module} import {names}"
            if node.module == "flowergraph":
                subs = [a.name for a in node.names if (REPO / "flowergraph" / a.name).is_dir()]
                subs += [a.name for a in node.names if (REPO / "flowergraph" / f"{a.name}.py").is_file()]
                found += [(node.lineno, f"flowergraph.{s}", written) for s in subs]
                if len(subs) < len(node.names):
                    found.append((node.lineno, "flowergraph", written))
            else:
                found.append((node.lineno, node.module, written))
    return [f for f in found if f[1].split(".")[0] in ("flowergraph", "benchmarks")]


def _uses() -> list[tuple[str, int, str, str]]:
    """(file, line, module, import) of every flowergraph or benchmarks import under reproductions/."""
    uses = []
    for path in sorted((REPO / "reproductions").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        uses += [(rel, line, module, written) for line, module, written in _imports(path)]
    return uses


def test_the_reproductions_import_only_flowergraphs_public_api():
    bad = [
        f"{file}:{line}: {written}"
        for file, line, module, written in _uses()
        if module not in PUBLIC and (file, module) not in INTERNAL
    ]
    assert not bad, (
        "imports of flowergraph's insides (or of benchmarks/) in reproductions/; use the public API "
        f"({', '.join(sorted(PUBLIC))}) or list them in INTERNAL with the reason:\n" + "\n".join(bad)
    )


def test_every_listed_internal_import_is_still_used():
    used = {(file, module) for file, _, module, _ in _uses()}
    gone = sorted(set(INTERNAL) - used)
    assert not gone, f"listed in INTERNAL but no longer imported (remove them from the list): {gone}"


def test_the_reproductions_are_not_installed_with_the_package():
    """pyproject's package discovery installs flowergraph's packages only: reproductions/ stays beside them."""
    import fnmatch
    import tomllib

    find = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert find["include"] == ["flowergraph*"]
    assert not any(fnmatch.fnmatch(name, p) for p in find["include"] for name in ("reproductions", "benchmarks"))


def test_the_scan_sees_imports_at_any_depth(tmp_path):
    """The scanner itself: a function-level import, ``from flowergraph import <submodule>`` and a plain import."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import flowergraph.app.inprocess\nfrom flowergraph import data, __version__\n\n"
        "def f():\n    from flowergraph.tasks.compute import configure_torch\n    import benchmarks.noop_methods\n"
    )
    assert [(line, module) for line, module, _ in _imports(sample)] == [
        (1, "flowergraph.app.inprocess"),
        (2, "flowergraph.data"),
        (2, "flowergraph"),
        (5, "flowergraph.tasks.compute"),
        (6, "benchmarks.noop_methods"),
    ]
