"""`lumina bench embed`: the chosen form is the fastest whose nDCG@10 holds within 0.005 of fp32 on every measured
collection, and `--json` prints one object with the documented keys. The harness's measurements are stubbed here
(the command itself prints the real figures)."""

from __future__ import annotations

import json

import pytest

from bench import embed_harness as embed_bench
from bench.embed_harness import EmbedBenchResult
from lumina_assets.cli.main import main


def _result(int8_delta: float | None, machine_form: str = "int8") -> EmbedBenchResult:
    result = EmbedBenchResult(texts=8, mean_tokens=200.0, rounds=2, machine_form=machine_form)
    result.per_s = {
        "sentence-transformers": [4.0, 5.0],
        "fp32": [10.0, 12.0],
        "int8": [20.0, 18.0],
        "bf16": [6.0],
    }
    result.cosine = {name: (0.995, 0.99) for name in result.per_s}
    if int8_delta is not None:
        result.ndcg = {
            "scifact": {"fp32": 0.70, "int8": 0.70 + int8_delta},
            "cisi": {"fp32": 0.40, "int8": 0.40},
        }
    return result


def test_the_fastest_form_whose_quality_holds_is_chosen():
    holds = _result(-0.004).summary()
    assert (holds["form"], holds["per_s"], holds["baseline_per_s"], holds["ratio"]) == (
        "int8",
        19.0,
        4.5,
        4.22,
    )
    assert holds["ndcg_delta_scifact"] == -0.004 and holds["ndcg_delta_cisi"] == 0.0
    fails = _result(-0.006).summary()  # int8 loses more than 0.005 on SciFact: fp32, though slower
    assert (fails["form"], fails["per_s"], fails["ndcg_delta_scifact"]) == ("fp32", 11.0, 0.0)
    unmeasured = _result(None, machine_form="fp32").summary()  # speed only: the machine's own choice
    assert unmeasured["form"] == "fp32" and unmeasured["ndcg_delta_cisi"] is None


def test_json_prints_one_object_with_the_documented_keys(monkeypatch, capsys, shared_data):
    seen = {}

    def fake_speed(texts, rounds, candidates, log):
        seen.update(texts=len(texts), rounds=rounds, candidates=list(candidates))
        return _result(None)

    def fake_quality(result, shared, collections, log):
        seen["collections"] = collections
        result.ndcg = _result(-0.001).ndcg

    monkeypatch.setattr(embed_bench, "measure_speed", fake_speed)
    monkeypatch.setattr(embed_bench, "measure_quality", fake_quality)
    assert main(["bench", "embed", "--json", "--limit", "6", "--rounds", "2", "--no-bf16"]) == 0
    printed = json.loads(capsys.readouterr().out)
    keys = {"baseline_per_s", "per_s", "ratio", "form", "ndcg_delta_scifact", "ndcg_delta_cisi"}
    assert keys <= set(printed) and printed["form"] == "int8" and printed["ndcg_delta_scifact"] == -0.001
    assert seen == {
        "texts": 6,
        "rounds": 2,
        "candidates": ["fp32", "int8"],
        "collections": ["scifact", "cisi"],
    }


def test_unknown_collections_are_refused(capsys, shared_data):
    assert main(["bench", "embed", "--collections", "msmarco"]) == 2
    assert "unknown collections" in capsys.readouterr().err


@pytest.mark.parametrize("limit", [3, 50])
def test_sample_texts_are_spread_over_the_corpus(shared_data, limit):
    texts = embed_bench.sample_texts(shared_data / "scifact" / "corpus.jsonl", limit)
    assert len(texts) == limit and len(set(texts)) == limit and all(". " in t for t in texts)
