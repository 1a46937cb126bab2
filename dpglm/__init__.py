"""dpglm: privacy-accounting-first differentially private GLM bandits and best-arm identification.

The package layout, the one-way imports between :mod:`accounting`, :mod:`mechanisms`,
:mod:`dpglm` and :mod:`audits`, and each package's concepts are in ``docs/design.md``.
``__version__`` is the project's version, a literal kept equal to ``pyproject.toml``'s by
``tests/test_public_api.py`` (reading it from ``importlib.metadata`` cost 90% of ``import dpglm``:
issue 26).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
