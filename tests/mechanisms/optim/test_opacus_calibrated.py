"""make_private_with_ledger: opacus's make_private_with_epsilon, calibrated to and charged through the ledger."""

import warnings
from fractions import Fraction

import pytest

from accounting import ApproxDP, Ledger

torch = pytest.importorskip("torch")
opacus = pytest.importorskip("opacus")


def problem(n=400, batch=40, seed=0):
    torch.manual_seed(seed)
    x = torch.randn(n, 3)
    y = (x.sum(1) > 0).float()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch)
    model = torch.nn.Linear(3, 1)
    return model, torch.optim.SGD(model.parameters(), lr=0.5), loader


def test_the_calibrated_run_uses_what_remains_where_opacus_rdp_calibration_over_noises():
    from mechanisms.optim.opacus_adapter import make_private_with_ledger

    delta = 1e-5
    ledger = Ledger(ApproxDP(1, delta), relation="add_remove")
    model, optimizer, loader = problem()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, optimizer, loader, charge = make_private_with_ledger(
            opacus.PrivacyEngine(), ledger, module=model, optimizer=optimizer, data_loader=loader, epochs=2,
            max_grad_norm=1.0)
        assert charge.steps == 20 and charge.receipt.charged.delta == Fraction(1, 10**5)
        assert 0.99 <= float(charge.receipt.charged.eps) <= 1  # the PLD ε the ledger charged, of ε = 1 left
        for xb, yb in loader:  # the run trains, capped at the charged steps
            optimizer.zero_grad()
            torch.nn.functional.binary_cross_entropy_with_logits(model(xb).view(-1), yb).backward()
            optimizer.step()
        theirs = opacus.PrivacyEngine(accountant="rdp")
        their_model, their_sgd, their_loader = problem()
        _, their_optimizer, _ = theirs.make_private_with_epsilon(
            module=their_model, optimizer=their_sgd, data_loader=their_loader, epochs=2, target_epsilon=1.0,
            target_delta=delta, max_grad_norm=1.0)
    assert their_optimizer.noise_multiplier > optimizer.noise_multiplier  # RDP calibration adds more noise
    with pytest.raises(TypeError, match="noise_multiplier"):
        model, sgd, loader = problem()
        make_private_with_ledger(opacus.PrivacyEngine(), Ledger(ApproxDP(1, delta), relation="add_remove"),
                                 module=model, optimizer=sgd, data_loader=loader, epochs=1, max_grad_norm=1.0,
                                 noise_multiplier=1.0)
