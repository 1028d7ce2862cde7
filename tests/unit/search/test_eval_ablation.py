"""`lumina eval beir --ablation`: the defaults, plain RRF, each retriever alone and each stage switched off
side by side on a tiny SciFact cut, each with a paired test against plain RRF; the paired math on known numbers."""

from __future__ import annotations

import json
import re

import pytest
from tuning_split import tuning_qrels, tuning_queries

from evals import ablation
from lumina_assets.cli.main import main


def scifact_cut(shared_data, target, claims: int, others: int):
    """`claims` tuning-half SciFact train claims (`corpus.splits`), their relevant abstracts and `others` other
    abstracts, in BEIR layout."""
    root = shared_data / "scifact"
    qrels = {qid: list(docs) for qid, docs in tuning_qrels(root).items()}
    queries = list(qrels)[:claims]
    wanted = {d for q in queries for d in qrels[q]}
    kept, taken = [], 0
    with (root / "corpus.jsonl").open() as handle:
        for line in handle:
            doc = json.loads(line)["_id"]
            if doc in wanted or taken < others:
                kept.append(line.rstrip("\n"))
                taken += doc not in wanted
    (target / "qrels").mkdir(parents=True)
    (target / "corpus.jsonl").write_text("\n".join(kept) + "\n")
    texts = tuning_queries(root)
    (target / "queries.jsonl").write_text(
        "\n".join(json.dumps({"_id": q, "text": texts[q]}) for q in queries) + "\n"
    )
    rows = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t1" for q in queries for d in qrels[q]]
    (target / "qrels" / "train.tsv").write_text("\n".join(rows) + "\n")
    return target


@pytest.fixture(scope="module")
def tiny_beir(tmp_path_factory, shared_data):
    """10 SciFact train claims, their relevant abstracts and 20 other abstracts."""
    return scifact_cut(shared_data, tmp_path_factory.mktemp("beir") / "ablationfact", 10, 20)


def test_ablation_prints_every_comparison_with_a_paired_test(tiny_beir, data_dir, capsys):
    assert main(["eval", "beir", str(tiny_beir), "--split", "train", "--ablation"]) == 0
    out = capsys.readouterr().out
    table = {line.split(" | ")[0].strip("| "): line for line in out.splitlines() if line.startswith("| ")}
    for name in ablation.ablation_rows():
        assert name in table, name
    assert "(baseline)" in table[ablation.BASELINE]
    paired = re.compile(r"\| [+-]\d\.\d{4} \[[+-]\d\.\d{4}, [+-]\d\.\d{4}\] p=\d\.\d{3} \|")
    for name in ablation.COMPARISONS:
        if name != ablation.BASELINE:
            assert paired.search(table[name]), table[name]
    ndcg = {name: float(line.split(" | ")[1]) for name, line in table.items() if name in ablation.COMPARISONS}
    assert ndcg["BM25 alone (passages)"] != ndcg["MiniLM alone (passage vectors)"]


def test_compare_to_baseline_pairs_queries():
    per_query = {
        ablation.BASELINE: {f"q{i}": 0.5 for i in range(30)},
        "better": {f"q{i}": 0.6 for i in range(30)},
        "same": {f"q{i}": 0.5 + (0.1 if i % 2 else -0.1) for i in range(30)},
    }
    rows = {c.name: c for c in ablation.compare_to_baseline(per_query)}
    assert rows[ablation.BASELINE].versus_baseline is None
    better = rows["better"].versus_baseline
    assert better.diff == pytest.approx(0.1) and better.p_value < 0.001 and better.low > 0
    same = rows["same"].versus_baseline
    assert same.p_value > 0.5 and same.low < 0 < same.high
    assert ablation.paired_column(rows["better"]).startswith("+0.1000 [")
