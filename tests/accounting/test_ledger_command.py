"""``dpglm ledger demo`` and ``dpglm ledger show``, driven through the command module."""

import argparse
import json
from fractions import Fraction

import pytest

from accounting import ZCDP, ApproxDP, Ledger, convert
from dpglm.commands import ledger as command


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return command.run(parser.parse_args(argv))


def test_demo_charges_the_paper_split_as_algorithm_2_would(tmp_path, capsys, claims):
    journal = tmp_path / "demo.db"
    assert run(["demo", "--journal", str(journal)]) == 0
    out = capsys.readouterr().out
    assert "refit 6 refused" in out and "refit 5 granted" in out
    assert "[analysis] paper Lemma 6.1" in out
    assert "BinaryTreeMechanism ×1" in out and "DPSGD ×5" in out
    with Ledger(ApproxDP(4, 0.02), journal=journal) as ledger:
        tree, switching, optimizer = (ledger.account(name) for name in ("tree", "switching", "optimizer"))
        share = (Fraction(4, 3), Fraction(1, 150))
        assert tree.currency == optimizer.currency == "zcdp"
        assert tree.budget.rho < convert.approx_to_zcdp(*share)
        assert tree.remaining == ZCDP(0) and optimizer.remaining == ZCDP(0)
        assert switching.spent == ApproxDP(*share)
        assert [u["count"] for u in optimizer.usage()] == [5]
        guarantee = ledger.guarantee()
        assert guarantee.delta == Fraction(1, 50) and guarantee.eps <= 4
        # each spent zCDP account reads its ladder at its whole ρ: its share (docs/accounting.md, "Claims")
        held = claims.best_order(4 / 3, 0.9 / 150)
        parts = [claims.claim_reference(lambda a, rho=float(account.spent.rho): a * rho, 4 / 3, 1 / 150, held)
                 for account in (tree, optimizer)]
        assert float(guarantee.eps) == pytest.approx(4 / 3 + sum(parts), rel=1e-8)


def test_demo_refuses_a_used_up_journal_with_the_report(tmp_path, capsys):
    """On main the rerun exited 0, printing "charged ZCDP(rho=0) once for T=5000"."""
    journal = tmp_path / "demo.db"
    assert run(["demo", "--journal", str(journal), "--refits", "1"]) == 0
    first = capsys.readouterr().out
    assert run(["demo", "--journal", str(journal), "--refits", "1"]) == 2
    captured = capsys.readouterr()
    assert not any(line.startswith("charged") for line in captured.out.splitlines()) and "rho=0" not in captured.out
    assert captured.out.strip() == first[first.index("Privacy ledger"):].strip()  # the same report, unchanged
    assert captured.err.startswith(f"dpglm ledger demo: journal {journal} was already charged")
    with Ledger.from_journal(journal, read_only=True) as ledger:
        assert [u["count"] for u in ledger.account("optimizer").usage()] == [1]


def test_show_prints_the_report_of_a_journal(tmp_path, capsys):
    journal = tmp_path / "demo.db"
    run(["demo", "--journal", str(journal), "--epsilon", "2", "--refits", "2"])
    capsys.readouterr()
    assert run(["show", str(journal), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["budget"]["exact"] == {"eps": "2", "delta": "1/50"}
    switching = [c for c in document["accounts"]["children"] if c["path"] == "switching"][0]
    assert switching["charges"][0]["analysis"] is True
    assert run(["show", str(journal)]) == 0
    assert "switching" in capsys.readouterr().out


@pytest.mark.parametrize("argv, name", [(["demo", "--epsilon", "0"], "epsilon"), (["demo", "--delta", "1"], "delta"),
                                        (["demo", "--refits", "0"], "refits"), (["demo", "--horizon", "0"], "horizon")])
def test_demo_rejects_bad_arguments(argv, name):
    with pytest.raises(ValueError, match=name):
        run(argv)


def test_show_refuses_a_damaged_or_missing_journal_in_one_line(tmp_path, capsys):
    journal = tmp_path / "demo.db"
    run(["demo", "--journal", str(journal), "--refits", "1"])
    capsys.readouterr()
    data = bytearray(journal.read_bytes())
    data[data.rindex(b'"DPSGD"') + 2] ^= 1  # one flipped byte in the last charge's payload
    journal.write_bytes(data)
    assert run(["show", str(journal)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"dpglm ledger show: journal {journal}: row ") and "is damaged" in err and "\n" not in err
    assert run(["show", str(tmp_path / "missing.db")]) == 2
    assert "does not exist" in capsys.readouterr().err
