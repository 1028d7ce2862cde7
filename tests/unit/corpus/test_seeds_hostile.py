"""The seeds file as hostile input: a YAML anchor bomb ("billion laughs"), a file far over the size cap, deep
nesting, a seed list far longer than `max_papers`, and wrongly typed settings, each reported in `problems`
instead of exhausting memory, making a request per seed, or failing the run."""

from __future__ import annotations

import json

import httpx
import pytest

from lumina_assets.core.http import HttpClient
from lumina_assets.core.sandbox import Limits, run_limited
from lumina_assets.corpus.crawl import crawl_arxiv, crawl_openalex
from lumina_assets.corpus.seeds import MAX_SEEDS_BYTES, MAX_YAML_ALIASES, load_seeds


def anchor_bomb(levels: int, width: int = 9) -> str:
    """The classic: each level lists the previous one `width` times, so the last expands to width**levels."""
    lines = ['a0: &a0 ["10.1/lol", "10.1/lol", "10.1/lol"]']
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * width)}]")
    lines.append(f"dois: *a{levels}")
    return "\n".join(lines) + "\n"


def test_an_anchor_bomb_is_refused_within_bounded_memory(tmp_path):
    """Before: 9 levels of 9 reached 6.5 GB in 84 s, then MemoryError in `seed_papers`. Here in a child process
    limited to 512 MB: the bomb is refused at its 33rd alias, with the reason."""
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(anchor_bomb(9))
    outcome = run_limited(load_seeds, bomb, limits=Limits(wall_seconds=60, memory_mb=512))
    assert outcome.ok, (outcome.reason, outcome.detail)
    seeds = outcome.value
    assert seeds.is_empty() and seeds.dois == []
    assert any("aliases" in p and "refused" in p for p in seeds.problems), seeds.problems


def test_a_small_bomb_is_refused_too(tmp_path):
    """Scaled down (6 levels: 531,441 strings), what the old reader expanded and listed as bad DOIs."""
    bomb = tmp_path / "small-bomb.yaml"
    bomb.write_text(anchor_bomb(6))
    seeds = load_seeds(bomb)
    assert seeds.dois == [] and any(f"more than {MAX_YAML_ALIASES} YAML aliases" in p for p in seeds.problems)


def test_a_few_aliases_are_fine(tmp_path):
    seeds_file = tmp_path / "seeds.yaml"
    seeds_file.write_text('common: &c ["10.1/a"]\ndois: *c\ncrawl: {depth: 0}\n')
    seeds = load_seeds(seeds_file)
    assert seeds.dois == ["10.1/a"] and seeds.depth == 0
    assert any("unknown key 'common'" in p for p in seeds.problems)


def test_a_seeds_file_over_the_cap_is_not_read(tmp_path):
    big = tmp_path / "big.yaml"
    with big.open("w") as handle:
        handle.write("dois:\n")
        while handle.tell() <= MAX_SEEDS_BYTES:
            handle.write('  - "10.1/filler"\n')
    seeds = load_seeds(big)
    assert seeds.dois == [] and "byte cap" in seeds.problems[0]


def test_deep_nesting_is_refused(tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text("dois: " + "[" * 5000 + "]" * 5000 + "\n")
    seeds = load_seeds(deep)
    assert seeds.dois == [] and any("nested deeper" in p for p in seeds.problems)


@pytest.mark.parametrize(
    "crawl, problem",
    [
        ('{depth: "deep"}', "crawl.depth: Input should be a valid integer"),
        ("{depth: 1000}", "crawl.depth: Input should be less than or equal to 5"),
        ("{max_papers: -3}", "crawl.max_papers: Input should be greater than or equal to 1"),
        ("{max_papers: [1, 2]}", "crawl.max_papers: Input should be a valid integer"),
        ('"everything"', "crawl: must be a mapping"),
        ("{references_per_paper: {a: 1}}", "crawl.references_per_paper"),
        ("{dpeth: 2}", "crawl: unknown key 'dpeth'"),
    ],
)
def test_a_wrongly_typed_setting_is_reported_and_the_default_kept(tmp_path, crawl, problem):
    """Before: `crawl: {depth: "deep"}` raised ValueError in `seed_papers`, failing the run."""
    seeds_file = tmp_path / "seeds.yaml"
    seeds_file.write_text(
        f'dois: ["10.1/a"]\ncrawl: {crawl}\nfilters: {{require_abstract: maybe, languages: en}}\n'
    )
    seeds = load_seeds(seeds_file)
    assert seeds.dois == ["10.1/a"]
    assert (seeds.depth, seeds.max_papers, seeds.references_per_paper) == (1, 150, 25)
    assert any(problem in p for p in seeds.problems), seeds.problems
    assert any(p.startswith("filters.require_abstract") for p in seeds.problems) and seeds.require_abstract
    assert any(p.startswith("filters.languages") for p in seeds.problems) and seeds.languages == ["en"]


def test_wrongly_typed_entries_are_named(tmp_path):
    seeds_file = tmp_path / "seeds.yaml"
    seeds_file.write_text(
        'dois: ["10.1/a", [nested], {a: b}, "not-a-doi"]\narxiv_ids: "2501.10120"\n'
        'arxiv_queries: [{query: "cells", max_results: lots}, {max_results: 3}, "plain query"]\n'
    )
    seeds = load_seeds(seeds_file)
    assert seeds.dois == ["10.1/a"] and seeds.arxiv_ids == []
    assert [(q.query, q.max_results) for q in seeds.arxiv_queries] == [("cells", 25), ("plain query", 25)]
    text = "\n".join(seeds.problems)
    assert "dois: not a DOI: a list" in text and "dois: not a DOI: a dict" in text and "'not-a-doi'" in text
    assert "arxiv_ids: must be a list" in text and "max_results" in text and "without a query" in text


def _openalex_work(number: int) -> dict:
    return {
        "id": f"https://openalex.org/W{1000 + number}",
        "doi": f"https://doi.org/10.1/seed{number}",
        "title": f"Seed paper {number}",
        "publication_year": 2020,
        "authorships": [],
        "referenced_works": [],
    }


def test_seeds_past_max_papers_are_not_asked(tmp_path):
    """Before: 100,000 seeds made one OpenAlex request each whatever `max_papers` said (2,659 requests in 300 s
    before it was stopped). Scaled down: 2,000 seeds, max_papers 5."""
    from lumina_assets.corpus.openalex import OpenAlexClient

    seeds_file = tmp_path / "seeds.yaml"
    seeds_file.write_text(
        json.dumps({"dois": [f"10.1/seed{n}" for n in range(2000)], "crawl": {"max_papers": 5, "depth": 0}})
    )
    seeds = load_seeds(seeds_file)
    assert len(seeds.dois) == 2000 and seeds.max_papers == 5
    asked = []

    def handler(request):
        asked.append(request.url.path)
        number = int(request.url.path.rsplit("seed", 1)[1])
        return httpx.Response(200, json=_openalex_work(number))

    client = OpenAlexClient(
        HttpClient(base_url="https://api.openalex.org", transport=httpx.MockTransport(handler))
    )
    result = crawl_openalex(client, seeds)
    assert len(result.papers) == 5 and len(asked) == 5
    assert result.requests_skipped == 1995


def test_arxiv_seeds_past_max_papers_are_not_asked(tmp_path):
    from lumina_assets.corpus.arxiv import ArxivClient

    asked = []

    def handler(request):
        asked.append(request.url.params.get("id_list", ""))
        return httpx.Response(200, text='<feed xmlns="http://www.w3.org/2005/Atom"></feed>')

    seeds_file = tmp_path / "seeds.yaml"
    seeds_file.write_text(
        json.dumps({"arxiv_ids": [f"2501.{n:05d}" for n in range(300)], "crawl": {"max_papers": 4}})
    )
    client = ArxivClient(
        HttpClient(
            base_url="https://export.arxiv.org/api",
            transport=httpx.MockTransport(handler),
            sleep=lambda s: None,
        )
    )
    result = crawl_arxiv(client, load_seeds(seeds_file))
    assert sum(len(ids.split(",")) for ids in asked if ids) == 4 and result.requests_skipped == 296
