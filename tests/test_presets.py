"""Run-config presets in conf/: every file is valid, and the launcher reads them (bad ones named)."""

import re
from pathlib import Path

import pytest

from flowergraph.settings import parse_run_config, parse_set
from flowergraph.errors import ConfigError
from flowergraph.simulation import load_preset, main

CONF = Path(__file__).resolve().parents[1] / "conf"


@pytest.mark.parametrize("path", sorted(CONF.glob("*.toml")), ids=lambda p: p.name)
def test_every_preset_is_a_valid_run_config(path):
    values = load_preset(path)
    settings = parse_run_config(values)
    assert settings.method == values.get("method", "fedavg")


def test_fedgcn_presets_are_the_issue_setting():
    s = parse_run_config(load_preset(CONF / "fedgcn-cora.toml"))
    n = s.of("node")
    assert (
        s.method,
        s.dataset,
        n.split,
        s.num_clients,
        s.rounds,
        n.local_steps,
        n.lr,
        n.optimizer,
        n.hidden,
        n.beta,
        s.weighting,
    ) == ("fedgcn", "Cora", "public", 10, 100, 3, 0.5, "sgd", 16, 10000.0, "uniform")
    he = {**load_preset(CONF / "fedgcn-cora.toml"), **load_preset(CONF / "fedgcn-cora-he.toml")}
    assert parse_run_config(he)["fedgcn.he"] is True


def test_bad_presets_are_named(tmp_path):
    with pytest.raises(ConfigError, match="preset '/no/such.toml' does not exist"):
        load_preset("/no/such.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("hopz = 2\n")
    with pytest.raises(
        ConfigError,
        match=r"unknown run-config key 'hopz'; close keys: fedgcn.hops; all [0-9]+ keys: docs/configuration.md",
    ):
        load_preset(bad)
    bad.write_text("hops = [\n")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_preset(bad)


def test_launcher_reads_presets_and_flags_override_them(tmp_path, capsys, monkeypatch):
    """--config then --set/flags; the launcher validates before starting anything (hops=7 is refused)."""
    import flowergraph.simulation as sim

    seen = {}

    def fake_run(method, num_clients, rounds, dataset, out, overrides, **kw):
        seen.update(method=method, num_clients=num_clients, rounds=rounds, dataset=dataset, overrides=overrides)
        raise ConfigError("stop here")

    monkeypatch.setattr(sim, "run_simulation", fake_run)
    assert main(["--config", str(CONF / "fedgcn-cora.toml"), "--rounds", "5", "--set", "fedgcn.hops=1"]) == 2
    assert seen["method"] == "fedgcn" and seen["rounds"] == 5 and seen["num_clients"] == 10
    assert (
        seen["dataset"] == "Cora"
        and seen["overrides"]["fedgcn.hops"] == 1
        and seen["overrides"]["node.beta"] == 10000.0
    )
    assert not {"method", "num-clients", "rounds", "dataset"} & set(seen["overrides"])  # arguments, not overrides
    assert "error: stop here" in capsys.readouterr().err


def test_old_names_of_renamed_keys_are_refused_naming_the_new_ones(tmp_path, capsys):
    """hops/he became fedgcn.hops/fedgcn.he: a preset, --set and a run config with an old name are refused as
    unknown keys (the launcher exits 2 before anything starts), each naming the known key with its last part."""
    old = tmp_path / "old.toml"
    old.write_text('method = "fedgcn"\nhops = 1\nhe = false\n')
    with pytest.raises(
        ConfigError,
        match=re.escape(
            f"preset {str(old)!r}: unknown run-config keys 'hops' (did you mean 'fedgcn.hops'?), 'he' (did you "
            f"mean 'fedgcn.he'?); all "
        ),
    ):
        load_preset(old)
    with pytest.raises(ConfigError, match=re.escape("unknown run-config key 'he'; did you mean 'fedgcn.he'?")):
        parse_run_config({"method": "fedgcn", "he": False})
    with pytest.raises(ConfigError, match=re.escape("unknown run-config key 'hops'; did you mean 'fedgcn.hops'?")):
        parse_set(["hops=1"])
    assert main(["--method", "fedgcn", "--set", "hops=1"]) == 2
    assert "unknown run-config key 'hops'; did you mean 'fedgcn.hops'?" in capsys.readouterr().err
    new = tmp_path / "new.toml"
    new.write_text('method = "fedgcn"\nfedgcn.hops = 1\nfedgcn.he = false\n')
    assert load_preset(new) == {"method": "fedgcn", "fedgcn.hops": 1, "fedgcn.he": False}
    assert parse_set(["fedgcn.hops=1"]) == {"fedgcn.hops": 1}
    nested = tmp_path / "nested.toml"  # a [fedgcn] table is the same as dotted keys, as Flower reads it
    nested.write_text('method = "fedgcn"\n[fedgcn]\nhops = 0\n')
    assert load_preset(nested) == {"method": "fedgcn", "fedgcn.hops": 0}


def test_fedstar_presets_carry_gcfls_thresholds_for_their_datasets():
    from flowergraph.methods.gcfl.server import GCFL_EPS

    for name, setting in (
        ("fedstar-chem", "CHEM"),
        ("fedstar-bio-chem", "BIO-CHEM"),
        ("fedstar-bio-chem-sn-offline", "BIO-CHEM-SN"),
        ("fedstar-bio-sn-cv-offline", "BIO-SN-CV"),
    ):
        s = parse_run_config(load_preset(CONF / f"{name}.toml"))
        assert (s["gcfl.eps1"], s["gcfl.eps2"]) == GCFL_EPS[setting]
