"""dpglm: privacy-accounting-first differentially private GLM bandits and best-arm identification.

The package layout, the one-way imports between :mod:`accounting`, :mod:`mechanisms`,
:mod:`dpglm` and :mod:`audits`, and each package's concepts are in ``docs/design.md``.
``__version__`` is the installed distribution's version (``pyproject.toml``), or
``"0+unknown"`` when the source tree is used without being installed.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dpglm")
except PackageNotFoundError:  # a source checkout on sys.path, not an installed distribution
    __version__ = "0+unknown"

__all__ = ["__version__"]
