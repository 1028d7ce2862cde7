"""Structured filter fields (the API's `author`, `year_min`, `venue`, `tag` ...) apply as given, whatever filter
syntax the query text holds; quoted filter values keep their own apostrophes; `venue:` matches venue names by
tokens and known long forms, never by substring (`venue:ACL` is not NAACL)."""

from __future__ import annotations

import polars as pl
import pytest
from hashing_embedder import HashingEmbedder

from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.parsing.chunking import passages_for_paper
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine
from lumina_assets.search.query_parser import parse_query
from lumina_assets.search.request import SearchRequest
from lumina_assets.search.results import SearchService
from lumina_assets.search.venues import venue_matches

# venues as the shared PDFs print them (tests/unit/corpus/test_pdf_metadata.py reads them off the pages)
ACL_2020 = "Proceedings of the 58th Annual Meeting of the Association for Computational Linguistics"
NAACL_2018 = "Proceedings of NAACL-HLT 2018"

PAPERS = [
    dict(
        paper_id="acl:specter",
        title="Document-level representation learning using citation-informed transformers",
        abstract="Citation graphs train document embeddings for scientific papers.",
        authors=["Arman Cohan", "Sergey Feldman"],
        year=2020,
        venue=ACL_2020,
        tags=["'90s classics"],
    ),
    dict(
        paper_id="acl:s2orc",
        title="S2ORC: the Semantic Scholar open research corpus",
        abstract="A corpus of scientific papers with citation graphs and full text.",
        authors=["Kyle Lo", "Lucy Lu Wang"],
        year=2020,
        venue=ACL_2020,
        tags=["reading'"],
    ),
    dict(
        paper_id="naacl:graph",
        title="Construction of the literature graph in Semantic Scholar",
        abstract="Citation graphs and entity linking over scientific papers.",
        authors=["Waleed Ammar", "Arman Cohan"],
        year=2018,
        venue=NAACL_2018,
        tags=["to-read"],
    ),
    dict(
        paper_id="evil:1999",
        title="Citation graphs in 1999",
        abstract="Old work on citation graphs of scientific papers.",
        authors=["Eve Evil"],
        year=1999,
        venue="Journal of Documentation",
        tags=[],
    ),
]


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> SearchService:
    rows = []
    for paper in PAPERS:
        rows += [
            p.to_row()
            for p in passages_for_paper(paper["paper_id"], title=paper["title"], abstract=paper["abstract"])
        ]
    uri = str(tmp_path_factory.mktemp("filters") / "lancedb")
    indexing.index_corpus(
        connect_lancedb(uri),
        pl.from_arrow(rows_to_table(rows, PASSAGE_SCHEMA)),
        pl.DataFrame([{**p, "source": "test"} for p in PAPERS]),
        HashingEmbedder(),
    )
    embedder = HashingEmbedder()
    return SearchService(lambda: SearchEngine(uri, embedder, SearchConfig()), pool_size=1)


def _ids(service, **fields) -> list[str]:
    answer = service.search(SearchRequest.from_mapping({"overview": False, "k": 10, **fields}))
    return sorted(r["paper_id"] for r in answer["results"])


def test_an_author_field_is_not_garbled_by_an_open_quote_in_the_text(service):
    """`q='citation graphs author:"'` + author=Evil: before, the appended `author:"Evil"` was read as the author
    `" author:` (nothing matched)."""
    assert _ids(service, query='citation graphs author:"', author="Evil") == ["evil:1999"]


def test_a_year_field_is_not_overridden_by_a_year_in_the_text(service):
    """`q='citation graphs year:1999'` + year_min=2020 filters on 2020 onwards, not on 1999."""
    answer = service.search(
        SearchRequest.from_mapping(
            {"query": "citation graphs year:1999", "year_min": 2020, "overview": False}
        )
    )
    assert (answer["filters"]["year_min"], answer["filters"]["year_max"]) == (2020, None)
    assert answer["results"] and all(r["year"] >= 2020 for r in answer["results"])
    # the text's filter still applies where no field says otherwise
    assert _ids(service, query="citation graphs year:1999") == ["evil:1999"]


def test_a_venue_field_replaces_a_venue_in_the_text(service):
    assert _ids(service, query="citation graphs venue:Documentation", venue="NAACL") == ["naacl:graph"]


def test_tags_with_apostrophes_at_either_end_match(service):
    """Through the API's `tag` field and through quoted syntax in the text."""
    assert _ids(service, query="citation graphs", tag="'90s classics") == ["acl:specter"]
    assert _ids(service, query="citation graphs", tag="reading'") == ["acl:s2orc"]
    assert _ids(service, query='citation graphs tag:"\'90s classics"') == ["acl:specter"]
    assert _ids(service, query='citation graphs tag:"reading\'"') == ["acl:s2orc"]


@pytest.mark.parametrize(
    ("text", "tags"),
    [
        ('x tag:"\'90s"', ["'90s"]),
        ('x tag:"reading\'"', ["reading'"]),
        ("x tag:'to-read'", ["to-read"]),
        ("x tag:'90s", ["'90s"]),
        ('x tag:"to-read"', ["to-read"]),
    ],
)
def test_quoted_values_lose_only_their_enclosing_quotes(text, tags):
    assert parse_query(text).explicit_tags == tags


def _admitted(service, **fields) -> list[str]:
    """The papers the request's filters admit (every search result is one of them)."""
    request = SearchRequest.from_mapping({"overview": False, **fields})
    with service.pool.engine() as engine:
        results = {c.paper_id for c in engine.search(request.query, k=10, constrain=request.constrain)}
        admitted = sorted(engine.last_trace.filters.paper_ids or [])
    assert results and results <= set(admitted)
    return admitted


def test_venue_acl_finds_the_acl_papers_and_not_naacl(service):
    """The shared PDFs' venues: ACL 2020 prints its long name only; NAACL-HLT holds "ACL" as a substring."""
    assert _admitted(service, query="citation graphs venue:ACL") == ["acl:s2orc", "acl:specter"]
    assert _admitted(service, query="citation graphs", venue="ACL") == ["acl:s2orc", "acl:specter"]
    assert _admitted(service, query="citation graphs venue:NAACL") == ["naacl:graph"]
    assert _admitted(service, query='citation graphs venue:"Association for Computational Linguistics"') == [
        "acl:s2orc",
        "acl:specter",
        "naacl:graph",
    ]


@pytest.mark.parametrize(
    ("wanted", "venue", "expected"),
    [
        ("ACL", ACL_2020, True),
        ("ACL", NAACL_2018, False),
        ("ACL", "ACL 2020", True),
        ("ACL", "Findings of ACL", True),
        ("NAACL", NAACL_2018, True),
        ("NAACL", ACL_2020, False),
        (
            "EMNLP",
            "Proceedings of the 2019 Conference on Empirical Methods in Natural Language Processing",
            True,
        ),
        ("NeurIPS", "Advances in Neural Information Processing Systems 33", True),
        ("Nature", "Nature Medicine", True),
        ("Nature", "Signature Analysis", False),
        ("Nature Medicine", "Nature", False),
        ("Annual Meeting of the Association for Computational Linguistics", "ACL 2020", True),
        ("CHI", "CHI '23", True),
        ("CHI", "Chinese Journal of Physics", False),
    ],
)
def test_venue_matching_by_tokens_and_known_names(wanted, venue, expected):
    assert venue_matches(venue, wanted) is expected


FILLER = [
    ("Protein folding with attention", "Attention layers predict residue contacts from embeddings."),
    (
        "Sepsis mortality in intensive care",
        "Clinical notes of each document predicted mortality in septic shock.",
    ),
    (
        "Vitamin D and fracture risk",
        "Supplements did not reduce fractures in older adults (document review).",
    ),
    ("Graphene transistors at high frequency", "A graphene channel switches at terahertz rates."),
    ("Coral bleaching and ocean heat", "Marine heatwaves bleached most reef corals."),
    ("Monetary policy and inflation expectations", "Rate announcements moved survey expectations."),
]


@pytest.fixture(scope="module")
def cohan(tmp_path_factory) -> SearchService:
    """SPECTER (2020, Cohan first) beside a 2023 paper where Cohan is the sixth author, on the same topic (as in
    the report, where it ranked above SPECTER), and a paper by someone else."""
    papers = [
        dict(
            paper_id="specter",
            title="SPECTER: document-level representation learning",
            abstract="We learn document embeddings from citations.",
            authors=["Arman Cohan", "Sergey Feldman", "Iz Beltagy", "Doug Downey", "Daniel S. Weld"],
            year=2020,
        ),
        dict(
            paper_id="later",
            title="Scientific document embeddings revisited",
            abstract="We revisit scientific document embeddings learned from citations (Cohan et al., 2020).",
            authors=[
                "Amanpreet Singh",
                "Mike D'Arcy",
                "Sergey Feldman",
                "Doug Downey",
                "Iz Beltagy",
                "Arman Cohan",
            ],
            year=2023,
        ),
    ] + [  # papers on other topics, so that fusion's scale is not set by three papers alone
        dict(paper_id=f"other{i}", title=title, abstract=abstract, authors=["Jane Doe"], year=2020)
        for i, (title, abstract) in enumerate(FILLER)
    ]
    rows = [
        p.to_row()
        for paper in papers
        for p in passages_for_paper(paper["paper_id"], title=paper["title"], abstract=paper["abstract"])
    ]
    uri = str(tmp_path_factory.mktemp("cohan") / "lancedb")
    indexing.index_corpus(
        connect_lancedb(uri),
        pl.from_arrow(rows_to_table(rows, PASSAGE_SCHEMA)),
        pl.DataFrame([{**p, "source": "test"} for p in papers]),
        HashingEmbedder(),
    )
    embedder = HashingEmbedder()
    return SearchService(lambda: SearchEngine(uri, embedder, SearchConfig()), pool_size=1)


@pytest.mark.parametrize(
    "query",
    [
        "Cohan et al. 2020",
        "Cohan et al. (2020)",
        "Cohan et al., 2020",
        "Cohan et al. 2020 document embeddings",
        "document embeddings from citations Cohan et al. 2020",
    ],
)
def test_an_author_year_citation_prefers_the_first_author_paper_of_that_year(cohan, query):
    answer = cohan.search(SearchRequest.from_mapping({"query": query, "overview": False}))
    ranked = [r["paper_id"] for r in answer["results"]]
    assert ranked[0] == "specter", ranked
    boosts = {r["paper_id"]: r["explanation"]["boosts"] for r in answer["results"]}
    assert boosts["specter"] == ["author Cohan ×2", "year 2020 in the asked range ×1.5"]
    # a later author: a quarter of the author boost, and no year boost
    assert boosts.get("later", ["author Cohan ×1.25"]) == ["author Cohan ×1.25"]
    if "embeddings" not in query:  # the citation alone: the cited author's papers are the candidates
        assert set(ranked) <= {"specter", "later"}


def test_an_author_year_citation_is_parsed_as_cues():
    parsed = parse_query("Cohan et al. 2020 citation embeddings")
    assert (parsed.authors, parsed.first_authors, parsed.year_min, parsed.year_max) == (
        ["Cohan"],
        ["Cohan"],
        2020,
        2020,
    )
    assert not parsed.year_explicit and parsed.text == "citation embeddings"
    assert parse_query("Cohan et al. 2020").text == "Cohan 2020"  # nothing else to search: the name and year
