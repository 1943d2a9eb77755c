"""Every command-line argument of every flowergraph command has a help text (`--help` describes it)."""

import argparse
import importlib

import pytest

COMMANDS = [
    ("flowergraph.simulation", "main"),
    ("flowergraph.partition", "main"),
    ("flowergraph.plot", "main"),
    ("flowergraph.data", "main"),
    ("flowergraph.deployment.cli", "main"),
    ("flowergraph.app.generator", "main"),
    ("flowergraph.app.runtime", "_main"),
    ("flowergraph.app.worker", "main"),
    ("flowergraph.privacy.ckks", "main"),
    ("flowergraph.settings.reference", "main"),
]


class _Built(Exception):
    pass


def _parser(monkeypatch, module: str, function: str) -> argparse.ArgumentParser:
    built = []

    def capture(self, *args, **kwargs):
        built.append(self)
        raise _Built

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    monkeypatch.setattr("sys.argv", ["prog"])
    fn = getattr(importlib.import_module(module), function)
    with pytest.raises(_Built):
        fn() if module == "flowergraph.settings.reference" else fn([])
    return built[0]


def _undocumented(parser: argparse.ArgumentParser, where: str) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                if not helps.get(name):
                    missing.append(f"{where} {name} (the subcommand)")
                missing += _undocumented(sub, f"{where} {name}")
            continue
        if not action.help:
            missing.append(f"{where} {'/'.join(action.option_strings) or action.dest}")
    return missing


@pytest.mark.parametrize("module,function", COMMANDS)
def test_every_argument_has_a_help_text(monkeypatch, module, function):
    parser = _parser(monkeypatch, module, function)
    assert _undocumented(parser, f"python -m {module}") == []


def test_run_config_check_names_what_flower_only_calls_invalid(capsys):
    """Flower refuses a --run-config key missing from pyproject.toml with a bare "Invalid run configuration.";
    `python -m flowergraph.app check` names it, with the closest valid key."""
    from flowergraph.app.generator import main

    assert main(["check", "num-client=3 method='fedavg'"]) == 2
    assert "unknown run-config key 'num-client'; did you mean 'num-clients'?" in capsys.readouterr().err
    assert main(["check", "num-clients=3 method='fedgcn' fedgcn.hops=1"]) == 0
    assert capsys.readouterr().out.startswith("ok: 3 key(s) valid")
    assert main(["check", "node.partitioner='metiss'"]) == 2
    assert "did you mean 'metis'?" in capsys.readouterr().err
