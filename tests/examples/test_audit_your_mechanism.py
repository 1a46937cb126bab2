"""The docs' own-mechanism audit: the correct clipped mean is consistent, the unclipped one refuted."""

import importlib.util
import math
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "audit_your_mechanism.py"


def test_the_clipped_mean_is_consistent_and_the_unclipped_one_refuted(tmp_path):
    spec = importlib.util.spec_from_file_location("audit_your_mechanism_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result, power = module.main(runs=5_000, plot=str(tmp_path / "plot.png"))
    assert result.verdict == "consistent" and result.claimed_epsilon == 1.0
    # The unclipped mean moves by 5/n against noise of scale 1/n: true ε = 5, far above the claim.
    assert power.verdict == "violated" and 1.0 < power.epsilon_lower_bound < 5.0
    assert (tmp_path / "plot.png").stat().st_size > 1000
    assert math.isfinite(result.epsilon_lower_bound)
