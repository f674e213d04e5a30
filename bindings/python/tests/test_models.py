"""opsel.models: the shipped models as package data."""

import os

import pytest

import opsel


def test_shipped_models_are_found_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("OPSEL_MODELS", raising=False)
    monkeypatch.chdir(tmp_path)
    names = opsel.models.names()
    assert {"passive", "active-s5c5s5b5", "bwe-live", "bwe-mr"} <= set(names)
    p = opsel.models.path("passive")
    assert os.path.isabs(p) and p.endswith(os.path.join("passive", "model.json"))
    model = opsel.load_model(p)
    assert model.window > 0 and len(model.classes) == 6
    assert opsel.models.path("bwe-live").endswith("live_gbt.json")
    assert "MODEL" in opsel.models.card("passive") or "model" in opsel.models.card("passive")


def test_unknown_or_unsafe_names_fail_clearly():
    with pytest.raises(opsel.InvalidInputError, match="available: .*passive"):
        opsel.models.path("no-such-model")
    for bad in ("", "../models", "passive/model.json", ".hidden"):
        with pytest.raises(opsel.InvalidInputError, match="not a plain name"):
            opsel.models.path(bad)


def test_opsel_models_env_overrides(tmp_path, monkeypatch):
    (tmp_path / "mine").mkdir()
    src = opsel.models.path("passive")
    (tmp_path / "mine" / "model.json").write_text(open(src).read())
    monkeypatch.setenv("OPSEL_MODELS", str(tmp_path))
    assert opsel.models.names() == ["mine"]
    assert opsel.models.path("mine") == str(tmp_path / "mine" / "model.json")
    with pytest.raises(opsel.InvalidInputError, match="no shipped model named 'passive'"):
        opsel.models.path("passive")
