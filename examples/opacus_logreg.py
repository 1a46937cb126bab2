"""An opacus logistic regression charged to a dpglm ledger before it trains (add/remove, as opacus assumes).

Run ``python examples/opacus_logreg.py``: prints the ledger's ε (dp-accounting's PLD of the planned
run) beside opacus's own RDP accountant's ε after training. See mechanisms/optim/opacus_adapter.py.
"""

import warnings

import torch
from opacus import PrivacyEngine

from accounting import ApproxDP, Ledger
from mechanisms.optim.opacus_adapter import charge_training


def main(epochs=3, n=1000, seed=0, delta=1e-5):
    torch.manual_seed(seed)
    X = torch.randn(n, 5)
    y = (X @ torch.ones(5) + torch.randn(n) > 0).float()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y), batch_size=50)
    model = torch.nn.Linear(5, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    engine = PrivacyEngine(accountant="rdp")
    model, optimizer, loader = engine.make_private(module=model, optimizer=optimizer, data_loader=loader,
                                                   noise_multiplier=1.0, max_grad_norm=1.0)
    ledger = Ledger(ApproxDP(4, delta), relation="add_remove")
    charge = charge_training(ledger, optimizer, sample_rate=loader.sample_rate, steps=epochs * len(loader),
                             delta=delta)
    for _ in range(epochs):
        for xb, yb in loader:
            optimizer.zero_grad()
            torch.nn.functional.binary_cross_entropy_with_logits(model(xb).view(-1), yb).backward()
            optimizer.step()
    return float(ledger.guarantee().eps), engine.get_epsilon(delta), charge, (model, optimizer, loader)


if __name__ == "__main__":
    warnings.filterwarnings("ignore")  # opacus: secure_mode and full-backward-hook notices
    ours, theirs, charge, _ = main()
    print(f"ledger ε = {ours:.4f} (PLD, charged before training); opacus RDP accountant ε = {theirs:.4f}; "
          f"{charge.taken} of {charge.steps} steps")
