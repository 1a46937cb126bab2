"""Noise coupling of two runs, shared by the privacy tests (docs/joint-dp-privacy.md, "The test").

The second run of a neighbouring pair calls its real mechanism (the charge and the noise
draw happen, so its generator streams stay aligned) and is handed the first run's
release instead: the value ``S′ + Z′`` takes when ``Z′ = Z + (S − S′)``. Whatever the
second run then does differently is not the releases' doing.
"""

from __future__ import annotations

from typing import Any


def couple(obj: object, method: str, log: list[Any], replay: bool) -> None:
    """Wrap ``obj.method``: record its results in ``log`` (first run), or return them in order (``replay``)."""
    real = getattr(obj, method)
    calls = iter(range(10**9))

    def call(*args: object, **kwargs: object) -> object:
        release = real(*args, **kwargs)
        if not replay:
            log.append(release)
            return release
        return log[next(calls)]

    setattr(obj, method, call)
