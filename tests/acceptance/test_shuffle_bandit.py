"""Acceptance: ``dpglm reproduce shuffle`` (paper Alg. 1 on stochastic contexts, issue 5).

The quick smoke runs in the default suite; the full reproduction is ``@pytest.mark.slow``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math

import pytest

from dpglm.experiments import shuffle


def _args(tmp_path, *extra):
    parser = argparse.ArgumentParser()
    shuffle.add_arguments(parser)
    return parser.parse_args(["--out", str(tmp_path), "--no-progress", *extra])


def _table(tmp_path):
    with open(tmp_path / "shuffle_table.csv") as handle:
        return list(csv.DictReader(handle))


def test_quick_reproduction_writes_table_curves_and_ledgers(tmp_path):
    assert shuffle.run(_args(tmp_path, "--quick")) == 0
    table = _table(tmp_path)
    assert {row["algorithm"] for row in table} == {"ShuffleDP-GLM", "B-GLinCB", "RS-GLinUCB"}
    assert {int(row["horizon"]) for row in table} == {500, 2000}
    assert (tmp_path / "shuffle_probit_d3.png").stat().st_size > 0
    ledgers = sorted((tmp_path / "ledgers").glob("ShuffleDP-GLM_*.json"))
    assert len(ledgers) == 2
    for path in ledgers:
        record = json.loads(path.read_text())
        asked, got = record["asked"], record["guaranteed"]
        assert got["epsilon"] <= asked["epsilon"] + 1e-12 and got["delta"] <= asked["delta"] + 1e-15
        halves = {child["path"]: child for child in record["ledger"]["accounts"]["children"]}
        assert set(halves) == {"covariance", "parameter"}
        for half in halves.values():  # each half: ε/2, spent once although every batch charged it
            assert half["budget"]["eps"] == pytest.approx(asked["epsilon"] / 2)
            assert half["spent"]["eps"] <= asked["epsilon"] / 2 + 1e-12
        n_stat = len(record["batch_lengths"]) - 1  # the last batch releases nothing
        receipts = record["per_batch_receipts"]
        assert sorted((r["half"], r["partition"]) for r in receipts) == sorted(
            (h, f"batch-{k}") for h in ("covariance", "parameter") for k in range(1, n_stat + 1))
        assert sum(r["charged_epsilon"] for r in receipts if r["half"] == "covariance") == pytest.approx(
            n_stat * asked["epsilon"] / 2)  # the sum exceeds the half: only parallel composition fits it
    with open(tmp_path / "shuffle_runs.csv") as handle:
        final = [r for r in csv.DictReader(handle) if r["t"] == r["horizon"]]
    assert all(float(r["regret"]) > 0 for r in final)


@pytest.mark.slow
def test_full_reproduction_sublinear_and_decreasing_in_epsilon(tmp_path):
    """Issue 5 at d = 5, both families, 3 runs: R(20000)/R(5000) well under 4 (< 3 here);
    regret averaged over (family, T) larger at ε = 2 than at ε = 8; and at ε = 8 within
    1.5× of the non-private B-GLinCB on the same schedule (measured over 5 runs at d = 5:
    602 at ε = 2, 398 at ε = 8, 325 for B-GLinCB)."""
    assert shuffle.run(_args(tmp_path, "--runs", "3", "--dims", "5",
                             "--algorithms", "ShuffleDP-GLM", "B-GLinCB")) == 0
    table = _table(tmp_path)
    for row in table:
        if int(row["horizon"]) == 20000:
            assert float(row["ratio_to_smallest_T"]) < 3.0, row

    def regret(algorithm, family, T, eps=math.inf):
        (value,) = [float(r["regret_mean"]) for r in table if r["algorithm"] == algorithm
                    and r["family"] == family and int(r["horizon"]) == T and float(r["epsilon"]) == eps]
        return value

    configs = [(family, T) for family in ("probit", "logistic") for T in (5000, 20000)]
    exact = sum(regret("B-GLinCB", family, T) for family, T in configs)
    private = {eps: sum(regret("ShuffleDP-GLM", family, T, eps) for family, T in configs) for eps in (2.0, 4.0, 8.0)}
    assert private[2.0] > private[8.0], private
    assert private[8.0] < 1.5 * exact, (private, exact)
