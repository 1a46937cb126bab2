"""The public surface: every exported name imports, the paper's policies are exported, the packaging metadata."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPORTING = ("accounting", "mechanisms", "mechanisms.optim", "dpglm", "dpglm.policies", "dpglm.bai", "audits")
PACKAGES = ("accounting", "mechanisms", "dpglm", "audits")


@pytest.mark.parametrize("name", EXPORTING)
def test_every_name_in_all_is_importable(name):
    module = importlib.import_module(name)
    exported = module.__all__
    assert len(exported) == len(set(exported)), f"{name}.__all__ repeats a name"
    missing = [item for item in exported if not hasattr(module, item)]
    assert missing == []


def test_the_papers_policies_are_exported():
    import dpglm.policies as policies
    from dpglm.policies.batched import BGLinCB, ShuffleDPGLMBandit
    from dpglm.policies.joint_dp import JointDPGLMBandit
    from dpglm.policies.rarely_switching import RSGLinUCB

    # Algorithm 2 (joint DP), Algorithm 1 (shuffle DP), their non-private cores, and the baselines.
    paper = {"JointDPGLMBandit": JointDPGLMBandit, "ShuffleDPGLMBandit": ShuffleDPGLMBandit,
             "RSGLinUCB": RSGLinUCB, "BGLinCB": BGLinCB}
    assert set(paper) | {"GLMUCB", "GLOC", "ECOLog"} <= set(policies.__all__)
    for name, cls in paper.items():
        assert getattr(policies, name) is cls
        assert issubclass(cls, policies.Policy)


def test_version_is_pyprojects():
    import dpglm

    # A literal (importlib.metadata cost 90% of `import dpglm`), kept equal to the project's version here.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert dpglm.__version__ == config["project"]["version"]


def test_each_package_is_marked_typed_and_ships_the_marker():
    for package in PACKAGES:
        assert (ROOT / package / "py.typed").is_file(), package
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["*"]
