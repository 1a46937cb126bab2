"""The opacus example: the ledger's ε beside opacus's accountant's, and the step cap of the adapter."""

import importlib.util
import warnings
from pathlib import Path

import dp_accounting
import pytest
import torch
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from accounting import ApproxDP, BudgetExceeded, Ledger
from mechanisms.optim.opacus_adapter import PlanExhausted, charge_training

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "opacus_logreg.py"


@pytest.fixture(scope="module")
def run():
    spec = importlib.util.spec_from_file_location("opacus_logreg_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return module.main(epochs=2)


def event(steps):
    step = dp_accounting.PoissonSampledDpEvent(50 / 1000, dp_accounting.GaussianDpEvent(1.0))
    return dp_accounting.SelfComposedDpEvent(step, steps)


def test_the_ledger_eps_is_dp_accountings_pld_and_opacus_rdp_is_looser(run):
    ours, theirs, charge, _ = run
    assert charge.steps == charge.taken == 40
    pld = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    pld.compose(event(40))
    assert ours == pytest.approx(pld.get_epsilon(1e-5), rel=1e-9)
    rdp = rdp_privacy_accountant.RdpAccountant()
    rdp.compose(event(40))
    assert theirs == pytest.approx(rdp.get_epsilon(1e-5), rel=2e-2)  # opacus's RDP, its own orders
    assert ours < theirs


def test_a_step_past_the_plan_raises_before_any_noise(run):
    *_, (model, optimizer, loader) = run
    before = [p.detach().clone() for p in model.parameters()]
    xb, yb = next(iter(loader))
    while len(yb) == 0:
        xb, yb = next(iter(loader))
    optimizer.zero_grad()
    torch.nn.functional.binary_cross_entropy_with_logits(model(xb).view(-1), yb).backward()
    with pytest.raises(PlanExhausted, match="past the 40 steps"):
        optimizer.step()
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_a_run_that_does_not_fit_is_refused_and_left_unguarded():
    from opacus import PrivacyEngine

    model = torch.nn.Linear(2, 1)
    data = torch.utils.data.TensorDataset(torch.zeros(100, 2), torch.zeros(100))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, optimizer, loader = PrivacyEngine().make_private(
            module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
            data_loader=torch.utils.data.DataLoader(data, batch_size=10), noise_multiplier=2.0, max_grad_norm=1.0)
    ledger = Ledger(ApproxDP(1, 1e-5), relation="add_remove")
    with pytest.raises(BudgetExceeded):
        charge_training(ledger, optimizer, sample_rate=loader.sample_rate, steps=300, delta=1e-5)
    assert not getattr(optimizer, "_dpglm_guarded", False) and ledger.root.spent == ApproxDP(0, 0)
    replace = Ledger(ApproxDP(10, 1e-5))  # replace-one: restated through PLD's replace-one, not the add/remove ε
    charge = charge_training(replace, optimizer, sample_rate=loader.sample_rate, steps=10, delta=1e-5)
    pld = pld_privacy_accountant.PLDAccountant(dp_accounting.NeighboringRelation.REPLACE_ONE,
                                               value_discretization_interval=1e-4)
    pld.compose(charge.event)
    assert float(charge.receipt.charged.eps) == pytest.approx(pld.get_epsilon(1e-5), rel=1e-9)
