"""The margin, pin and ablation tests read the tuning half of SciFact train only: the held-out half is the
benchmark's (`lumina_assets.corpus.splits`). Their subset builders run here with the qrels and query readers wrapped
so that reading a held-out query's judgments or text fails, and every id they keep is checked; a tuning test that
reads the files by hand, past the wrapped readers, fails the source check."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from lumina_assets.corpus import collections, splits

TUNING_TESTS = ("test_search_quality_margins", "test_search_pipeline", "test_eval_ablation")
HERE = Path(__file__).parent


class HeldOutRead(AssertionError):
    pass


class GuardedReads(dict):
    """A reader's result whose held-out entries cannot be read: keys may be listed (to split them), values of a
    held-out id raise."""

    def _check(self, key):
        if splits.is_held_out(str(key)):
            raise HeldOutRead(f"a tuning test read held-out query {key!r}")

    def __getitem__(self, key):
        self._check(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self._check(key)
        return super().get(key, default)

    def items(self):
        return [(k, self[k]) for k in self]

    def values(self):
        return [self[k] for k in self]


@pytest.fixture
def guarded_readers(monkeypatch):
    real_qrels, real_queries = collections.read_qrels, collections.read_queries
    monkeypatch.setattr(collections, "read_qrels", lambda path: GuardedReads(real_qrels(path)))
    monkeypatch.setattr(collections, "read_queries", lambda root: GuardedReads(real_queries(root)))


def test_the_guard_catches_a_held_out_read(guarded_readers, shared_data):
    """The wrapper is live: reading every query's judgments (what the tests did before) fails."""
    qrels = collections.read_qrels(shared_data / "scifact" / "qrels" / "train.tsv")
    with pytest.raises(HeldOutRead):
        {qid: qrels[qid] for qid in qrels}


def _assert_tuning_only(ids) -> None:
    ids = [str(i) for i in ids]
    assert ids, "the subset has no queries"
    assert not splits.held_out_ids(ids), f"held-out ids in a tuning subset: {splits.held_out_ids(ids)[:5]}"


def test_margin_and_pin_subsets_read_tuning_ids_only(guarded_readers, shared_data):
    root = shared_data / "scifact"
    margins = importlib.import_module("test_search_quality_margins").scifact_subset_of(root)
    pipeline = importlib.import_module("test_search_pipeline").small_scifact_of(root)
    for subset in (margins, pipeline):
        _assert_tuning_only(subset.queries)
        _assert_tuning_only(subset.qrels)


def test_ablation_cut_reads_tuning_ids_only(guarded_readers, shared_data, tmp_path):
    cut = importlib.import_module("test_eval_ablation").scifact_cut(shared_data, tmp_path / "cut", 10, 5)
    qrels_ids = [line.split("\t")[0] for line in (cut / "qrels" / "train.tsv").read_text().splitlines()[1:]]
    query_ids = re.findall(r'"_id":\s*"([^"]+)"', (cut / "queries.jsonl").read_text())
    _assert_tuning_only(qrels_ids)
    _assert_tuning_only(query_ids)


@pytest.mark.parametrize("name", TUNING_TESTS)
def test_tuning_tests_read_qrels_and_queries_through_the_tuning_split(name):
    """No tuning test opens a qrels file or queries.jsonl itself: only `tuning_split` (tests/support) does."""
    source = (HERE / f"{name}.py").read_text(encoding="utf-8")
    assert "from tuning_split import" in source
    for pattern in (
        r"read_qrels\(",
        r"read_queries\(",
        r"\.tsv\"\)\.(read_text|open)",
        r"queries\.jsonl\"\)\.(read_text|open)",
    ):
        hits = [
            line for line in source.splitlines() if re.search(pattern, line) and "tuning_split" not in line
        ]
        assert not hits, f"{name} reads judgments or queries directly: {hits}"


def test_an_ablation_reads_the_tuning_half_unless_told_otherwise():
    """`lumina eval beir --ablation` chooses settings: on a train split it reads the tuning half by default."""
    from types import SimpleNamespace

    from lumina_assets.cli.evaluation import query_subset_name

    assert query_subset_name(SimpleNamespace(subset=None, ablation=True)) == splits.TUNING
    assert query_subset_name(SimpleNamespace(subset=None, ablation=False)) == splits.WHOLE
    assert query_subset_name(SimpleNamespace(subset="heldout", ablation=True)) == splits.HELD_OUT
