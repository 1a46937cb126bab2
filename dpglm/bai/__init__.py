"""Fixed-confidence best-arm identification under ε-global DP (Jourdan & Azize 2025).

Divergences and transport costs (:mod:`~dpglm.bai.divergences`), the
characteristic time (:mod:`~dpglm.bai.characteristic_time`), stopping thresholds
(:mod:`~dpglm.bai.thresholds`, :mod:`~dpglm.bai.mixture_threshold`), the Top Two
engine and DP-TT, EB-TCI (:mod:`~dpglm.bai.top_two`, :mod:`~dpglm.bai.block_engine`,
:mod:`~dpglm.bai.estimators`), AdaP-TT(⋆) (:mod:`~dpglm.bai.adap_tt` with the thesis'
costs and thresholds in :mod:`~dpglm.bai.gaussian_thresholds`) and DP-SE
(:mod:`~dpglm.bai.successive_elimination`).
"""

from dpglm.bai.adap_tt import AdaPTT, AdaPTTStar
from dpglm.bai.characteristic_time import CharacteristicTime, characteristic_time
from dpglm.bai.divergences import d_eps, d_minus, d_plus, kl, transport_cost
from dpglm.bai.successive_elimination import DPSE
from dpglm.bai.thresholds import GammaThreshold, HeuristicThreshold, LaplaceTailThreshold
from dpglm.bai.top_two import BAIResult, DPTopTwo, EBTopTwo

__all__ = [
    "AdaPTT",
    "AdaPTTStar",
    "BAIResult",
    "CharacteristicTime",
    "DPSE",
    "DPTopTwo",
    "EBTopTwo",
    "GammaThreshold",
    "HeuristicThreshold",
    "LaplaceTailThreshold",
    "characteristic_time",
    "d_eps",
    "d_minus",
    "d_plus",
    "kl",
    "transport_cost",
]
