"""Write the golden round records (``tests/golden/<case>.json``) with the code of this checkout.

    .venv/bin/python tests/golden/generate.py [--data-dir ../shared/datasets] [CASE ...]

Each case of ``tests/golden_cases.py`` runs once through Flower's Simulation Engine in this process (the inline
backend, flowergraph's own ServerApp and ClientApp, the face ``flower-api`` selects: the default), and its round
records and summary, without their timings, are written with the commit and the flowergraph version that made
them. It refuses to overwrite a file another commit wrote unless ``--replace`` is given.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))

import golden_cases as gc  # noqa: E402


def commit() -> str:
    out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    dirty = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "flowergraph"], capture_output=True, text=True
    )
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def run_case(name: str, data: Path, tmp: Path, face: str | None = None) -> dict:
    """Case ``name``'s untimed round records and summary."""
    from flowergraph.app import client_app, server_app
    from flowergraph.app.generator import write_app
    from flowergraph.app.inline import run_inline
    from flowergraph.storage.results import read_run

    import records

    config = gc.case_config(name, data, tmp)
    out = tmp / "out"
    overrides = {**config, "out-dir": str(out)}
    if face:
        overrides["flower-api"] = face
    gc.seed_flower_dp()
    run_inline(
        server_app.app,
        client_app.app,
        num_supernodes=gc.num_nodes(name, config),
        app_dir=write_app(tmp / "app"),
        overrides=overrides,
    )
    run = read_run(out)
    return {"rounds": records.untimed(run["rounds"], gc.COSTS), "summary": records.untimed(run["summary"], gc.COSTS)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", default=list(gc.CASES), help=f"of {', '.join(gc.CASES)}")
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "datasets"))
    parser.add_argument("--replace", action="store_true", help="overwrite files another commit wrote")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.cases) - set(gc.CASES))
    if unknown:
        parser.error(f"unknown case(s) {unknown}; choose from {list(gc.CASES)}")
    made_by = commit()
    import torch

    torch.set_num_threads(1)
    for name in args.cases:
        path = gc.GOLDEN / f"{name}.json"
        if path.exists() and not args.replace:
            old = json.loads(path.read_text()).get("commit")
            if old != made_by:
                print(f"{path} was written at {old}: pass --replace to overwrite it", file=sys.stderr)
                return 2
        with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
            got = run_case(name, Path(args.data_dir), Path(tmp))
        from flowergraph import __version__

        record = {"case": name, "commit": made_by, "flowergraph": __version__, **got}
        path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        print(f"{name}: {len(got['rounds'])} round records -> {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
