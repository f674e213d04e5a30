"""The shared golden fixture (tests/fixtures, also used by the Rust, C and Node
suites): identical predictions and distances from Python."""

import json
import pathlib

import numpy as np
import pytest

import opsel

FIXTURES = pathlib.Path(__file__).resolve().parents[3] / "tests" / "fixtures"
GOLDEN = json.loads((FIXTURES / "knn_golden.json").read_text())
TOL = GOLDEN["tolerance"]["distance_relative"]


def close(got, want):
    return abs(got - want) <= TOL * max(1.0, abs(want))


@pytest.fixture(scope="module")
def model():
    return opsel.load_model(str(FIXTURES / GOLDEN["model_file"]))


def test_model_summary(model):
    s = GOLDEN["model"]
    assert model.window == s["window"] and model.k == s["k"] and model.radius == s["radius"]
    assert model.cost == s["cost"] and model.normalization == s["normalization"]
    assert model.classes == s["classes"] and len(model) == s["references"]


@pytest.mark.parametrize("q", GOLDEN["queries"], ids=lambda q: f"query{q['id']}")
def test_queries(model, q):
    p = model.classify(np.array(q["window"]))
    assert (p.label, p.class_index, p.neighbor, p.votes) == (q["class"], q["class_index"], q["neighbor"], q["votes"])
    assert close(p.distance, q["distance"]) and close(p.confidence, q["confidence"])
    probs = model.predict_proba(np.array([q["window"]]))[0]
    assert all(close(g, w) for g, w in zip(probs, q["probabilities"]))


def test_batch_matches(model):
    X = np.array([q["window"] for q in GOLDEN["queries"]])
    assert [p.label for p in model.classify_batch(X)] == [q["class"] for q in GOLDEN["queries"]]


@pytest.mark.parametrize("pair", GOLDEN["dtw"], ids=lambda p: f"r{p['radius']}-{p['cost']}-{len(p['a'])}x{len(p['b'])}")
def test_dtw_pairs(pair):
    got = opsel.dtw_distance(np.array(pair["a"]), np.array(pair["b"]), radius=pair["radius"], cost=pair["cost"])
    assert close(got, pair["distance"])
