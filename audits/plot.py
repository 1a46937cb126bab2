"""The score plot of an audit: both neighbours' histograms of the chosen statistic, the threshold, an honest title."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from audits.base import AuditResult

__all__ = ["plot_result"]


def plot_result(result: AuditResult, path: str) -> None:
    """Histograms of the chosen statistic on the two neighbours, the threshold, and an honest title.

    The title says "certified" only of the assumption-free bound; a μ-GDP
    reading is labelled "assuming a Gaussian tradeoff" (:meth:`audits.base.AuditResult.title`).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    null, alternative = result.scores_null, result.scores_alternative
    pooled = np.concatenate([null, alternative])
    pooled = pooled[np.isfinite(pooled)]  # ±inf scores are legal; they are counted, not drawn
    low, high = np.quantile(pooled, [0.001, 0.999]) if pooled.size else (0.0, 1.0)
    integer = np.all(pooled == np.round(pooled)) and high - low <= 200
    edges = np.arange(low - 0.5, high + 1.5) if integer else np.linspace(low, high if high > low else low + 1, 80)
    bins: list[float] = edges.tolist()
    figure, axis = plt.subplots(figsize=(6.4, 3.8))
    axis.hist(null[np.isfinite(null)], bins=bins, alpha=0.55, density=True, label="D0 (null)")
    axis.hist(alternative[np.isfinite(alternative)], bins=bins, alpha=0.55, density=True, label="D1 (alternative)")
    if np.isfinite(result.threshold):
        axis.axvline(result.threshold, color="black", linestyle="--", linewidth=1, label="threshold")
    axis.set_xlabel(result.statistic)
    axis.set_ylabel("density")
    axis.set_title(result.title(), fontsize=8)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
