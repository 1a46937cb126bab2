"""The catalogue covers every noise-drawing mechanism with a real-mechanism audit and a planted bug."""

import importlib
import inspect
import pkgutil

import mechanisms
from audits.catalogue import CATALOGUE


def _noise_drawing_classes() -> set[str]:
    """Public, concrete ``mechanisms.base.Mechanism`` subclasses under ``mechanisms/`` (they charge, then draw)."""
    from mechanisms.base import Mechanism

    names = set()
    for info in pkgutil.walk_packages(mechanisms.__path__, "mechanisms."):
        module = importlib.import_module(info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or name.startswith("_") or inspect.isabstract(cls):
                continue
            if issubclass(cls, Mechanism) and cls is not Mechanism:
                names.add(name)
    return names


def test_the_scan_finds_the_known_mechanisms():
    # Independent list (the README's mechanisms): the scan must at least see these.
    known = {"GaussianMechanism", "LaplaceMechanism", "BinaryTreeMechanism", "SquareRootFactorizationMechanism",
             "GeometricBatchMean", "ShuffleBitSum", "ShuffleVectorSum", "DPSGD", "ShufflePGD"}
    assert known <= _noise_drawing_classes()


def test_every_noise_drawing_class_has_a_real_and_a_planted_audit():
    audited, planted = set(), set()
    for spec in CATALOGUE.values():
        audit = spec.build(spec.epsilons[0], True)
        (audited if spec.expected == "consistent" else planted).add(audit.mechanism)
    missing = _noise_drawing_classes() - audited
    assert not missing, f"noise-drawing classes without a real-mechanism audit: {sorted(missing)}"
    assert not _noise_drawing_classes() - planted, "every audited mechanism needs a planted bug"


def test_family_confidence_is_bonferroni_over_the_real_rows_only():
    from audits.catalogue import family_confidence

    tasks = [(spec, eps) for spec in CATALOGUE.values() for eps in spec.epsilons]
    levels = family_confidence(tasks)
    real = sum(spec.expected == "consistent" for spec, _ in tasks)
    assert real > 30
    for (spec, _), level in zip(tasks, levels, strict=True):
        assert level == (1 - 0.05 / real if spec.expected == "consistent" else 0.95)
    # Union bound: the real rows' false-alarm probabilities sum to at most 5 %.
    assert sum(1 - level for (spec, _), level in zip(tasks, levels, strict=True) if spec.expected == "consistent") \
        <= 0.05 + 1e-12


def test_every_dpsgd_engine_has_a_real_and_a_planted_row():
    """Each production path of DP-SGD is audited (issue 33: a bug in an unaudited engine passed every audit)."""
    from audits.dpsgd import DPSGDAudit
    from mechanisms.optim.dpsgd import ENGINES

    rows = {"consistent": set(), "violated": set()}
    for spec in CATALOGUE.values():
        audit = spec.build(spec.epsilons[0], True)
        if isinstance(audit, DPSGDAudit):
            rows[spec.expected].add(audit.engine)
    assert rows["consistent"] == set(ENGINES)
    assert rows["violated"] == set(ENGINES)
