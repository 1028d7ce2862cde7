"""Qrels matching whoever the provider is: external providers' results are matched to SciFact's papers by Semantic
Scholar corpus id (SciFact's doc ids are S2ORC = S2 corpus ids), DOI, arXiv id and normalized title, so an external
provider that returns a relevant SciFact paper scores > 0 on SciFact's qrels; one whose results match nothing is
left out of the qrels measures with the reason, never scored 0.

The bodies below are shaped like the real APIs' responses and carry real SciFact papers (titles, abstract sentences
and corpus ids from ../shared/data/scifact). SerpAPI's body keeps the recorded response in
api_fixtures/serpapi_google_scholar (metadata, parameters, result fields) with its organic results replaced. No real
recording of Semantic Scholar snippet search or of Exa exists here: those follow the documented schemas (S2 Graph
API OpenAPI `/snippet/search`: data[].snippet{text, snippetKind, section, snippetOffset}, data[].score,
data[].paper{corpusId, title, authors, openAccessInfo}; `/paper/batch` answers one record or null per id; Exa
`/search`: results[]{id, url, title, score, publishedDate, author, highlights[], highlightScores[]}, requestId,
costDollars).
"""

from __future__ import annotations

import copy
import json

import httpx
import polars as pl
import pytest

from evals import runner, scoring
from evals.matching import PaperMatcher, match_counts, qrels_exclusions
from evals.providers import ExaProvider, GoogleScholarProvider, SemanticScholarProvider
from evals.questions import load_beir_queries
from evals.recursive import Refinement
from lumina_assets.core.schemas import Context
from lumina_assets.corpus.collections import read_corpus
from resources.providers import ExaResource, SemanticScholarResource, SerpApiScholarResource

# held-out SciFact train claims (lumina_assets.corpus.splits) -> their evidence abstract
CLAIMS = {"2": "13734012", "9": "44265107", "32": "12428497", "34": "11705328"}
OUTSIDE = "Bananas and plantains"  # a real Google Scholar result, not a SciFact paper


class NoRefiner:
    method = "none"

    def refine(self, question, previous, contexts):
        return Refinement(None, self.method, failure="not used")


@pytest.fixture(scope="module")
def scifact(shared_data):
    folder = shared_data / "scifact"
    corpus = read_corpus(folder)
    papers = pl.DataFrame(
        [
            {"paper_id": f"beir-scifact:{doc}", "title": d["title"], "source": "beir", "source_id": doc}
            for doc, d in corpus.items()
        ]
    )
    questions = load_beir_queries(folder, n=0).filter(pl.col("beir_query_id").is_in(list(CLAIMS)))
    assert questions.height == len(CLAIMS) and questions["held_out"].all()
    return folder, corpus, papers, questions


def sentence(corpus, doc: str, index: int = 0) -> str:
    return corpus[doc]["text"].split(". ")[index].rstrip(".") + "."


def serve(bodies_by_query: dict[str, dict], *, post_batch=None):
    """A MockTransport answering each request with the body recorded for its query."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/paper/batch"):
            ids = json.loads(request.content)["ids"]
            return httpx.Response(200, json=[post_batch(i) if post_batch else None for i in ids])
        if request.method == "POST":
            query = json.loads(request.content)["query"]
        else:
            query = request.url.params.get("query") or request.url.params.get("q")
        return httpx.Response(200, json=bodies_by_query.get(query, {}))

    return httpx.MockTransport(handler)


def s2_snippet_body(corpus, doc: str) -> dict:
    return {
        "data": [
            {
                "snippet": {
                    "text": sentence(corpus, doc, 1),
                    "snippetKind": "abstract",
                    "section": "",
                    "snippetOffset": {"start": 0, "end": 200},
                },
                "score": 0.71,
                "paper": {
                    "corpusId": doc,  # the corpus id of the SciFact paper
                    "title": corpus[doc]["title"],
                    "authors": [],
                    "openAccessInfo": {"license": None, "status": "CLOSED", "disclaimer": ""},
                },
            },
            {
                "snippet": {"text": "Bananas are a staple crop.", "snippetKind": "body", "section": "Intro"},
                "score": 0.42,
                "paper": {"corpusId": "1", "title": OUTSIDE, "authors": [], "openAccessInfo": {}},
            },
        ],
        "retrievalVersion": "pa1-v1",
    }


def serpapi_body(shared_data, corpus, doc: str, *, truncate: bool) -> dict:
    recorded = json.loads(
        (shared_data / "api_fixtures/serpapi_google_scholar/google_scholar_q-bananas_num-2.json").read_text()
    )
    body = copy.deepcopy(recorded)
    relevant = copy.deepcopy(recorded["organic_results"][1])
    title = corpus[doc]["title"]
    # Google Scholar cuts long titles with an ellipsis and lower-cases nothing: keep its habits
    relevant.update(
        title=(title[:70].rsplit(" ", 1)[0] + " …") if truncate else title,
        link="https://www.sciencedirect.com/science/article/pii/S0000000000000000",
        snippet="… " + sentence(corpus, doc, 1)[:160] + " …",
        result_id="scifact" + doc,
    )
    body["organic_results"] = [relevant, recorded["organic_results"][0]]  # the relevant one, then bananas
    return body


def exa_body(corpus, doc: str) -> dict:
    return {
        "requestId": "c1",
        "resolvedSearchType": "neural",
        "results": [
            {
                "id": "https://pubmed.ncbi.nlm.nih.gov/" + doc,
                "url": "https://pubmed.ncbi.nlm.nih.gov/" + doc,
                "title": corpus[doc]["title"].upper().rstrip("."),  # case and punctuation differ
                "score": 0.3,
                "highlights": [sentence(corpus, doc, 1)],
                "highlightScores": [0.4],
            },
            {
                "id": "https://example.org/b",
                "url": "https://example.org/b",
                "title": OUTSIDE,
                "highlights": ["x"],
            },
        ],
        "costDollars": {"total": 0.005},
    }


def scored(provider, questions, papers):
    frame = runner.run_recursive(
        provider,
        questions,
        pl.DataFrame(schema=runner.PROVIDER_RESULT_SCHEMA),
        page_sizes=[5],
        max_depth=0,
        refiner=NoRefiner(),
    )
    matcher = PaperMatcher.from_papers(papers)
    counts = match_counts(frame, matcher)
    per_question = scoring.question_scores(
        frame, None, questions, matcher=matcher, qrels_excluded=qrels_exclusions(counts)
    )
    return frame, counts, per_question


def test_semantic_scholar_snippets_match_scifact_by_corpus_id(scifact, data_dir):
    folder, corpus, papers, questions = scifact
    texts = dict(zip(questions["beir_query_id"], questions["text"], strict=True))
    bodies = {texts[q]: s2_snippet_body(corpus, doc) for q, doc in CLAIMS.items()}
    resource = SemanticScholarResource(api_key="k", base_url="https://s2.test/graph/v1", min_interval_s=0.0)
    provider = SemanticScholarProvider(resource.get_client(transport=serve(bodies)))
    _, counts, per_question = scored(provider, questions, papers)
    row = counts.row(0, named=True)
    assert (row["results"], row["matched"], row["unmatched"], row["by S2 corpus id"]) == (8, 4, 4, 4)
    assert per_question["recall_p"].to_list() == [1.0] * 4  # every relevant paper found: > 0, not 0 by DOI
    assert per_question["ndcg_p"].min() == pytest.approx(1.0)  # each at rank 1
    assert per_question["cr_qrels"].to_list() == [pytest.approx(1 / 5)] * 4  # 1 relevant of p = 5


def test_google_scholar_titles_match_exactly_or_cut_short(scifact, shared_data, data_dir):
    folder, corpus, papers, questions = scifact
    texts = dict(zip(questions["beir_query_id"], questions["text"], strict=True))
    bodies = {
        texts[q]: serpapi_body(shared_data, corpus, doc, truncate=q == "32") for q, doc in CLAIMS.items()
    }
    resource = SerpApiScholarResource(api_key="serp", base_url="https://serp.test", min_interval_s=0.0)
    provider = GoogleScholarProvider(resource.get_client(transport=serve(bodies)))
    _, counts, per_question = scored(provider, questions, papers)
    row = counts.row(0, named=True)
    assert row["matched"] == 4 and row["by title"] == 3 and row["by fuzzy title"] == 1  # 32's title is cut
    assert row["unmatched"] == 4  # "Bananas and plantains" is no SciFact paper
    assert per_question["recall_p"].to_list() == [1.0] * 4


def test_exa_titles_match_after_normalization(scifact, data_dir):
    folder, corpus, papers, questions = scifact
    texts = dict(zip(questions["beir_query_id"], questions["text"], strict=True))
    bodies = {texts[q]: exa_body(corpus, doc) for q, doc in CLAIMS.items()}
    resource = ExaResource(api_key="exa", base_url="https://exa.test", min_interval_s=0.0)
    provider = ExaProvider(resource.get_client(transport=serve(bodies)))
    _, counts, per_question = scored(provider, questions, papers)
    assert counts.row(0, named=True)["by title"] == 4
    assert per_question["ndcg_p"].min() > 0
    assert provider.stats() == {"reported_cost_usd": pytest.approx(0.02), "unpriced_requests": 0}


def test_unmatchable_provider_is_left_out_with_the_reason_not_scored_zero(scifact):
    _, _, papers, questions = scifact

    class Elsewhere:
        name = "elsewhere"

        def search(self, query, k):
            return [Context(f"{OUTSIDE} {i}", [f"text {i}"], url=f"https://e.org/{i}") for i in range(k)]

    frame, counts, per_question = scored(Elsewhere(), questions, papers)
    reasons = qrels_exclusions(counts)
    assert "none of its 20 results matched" in reasons["elsewhere"]
    assert per_question["ndcg_p"].null_count() == per_question.height  # not 0: not scored
    table = scoring.score(per_question, resamples=20).filter(pl.col("question_set") == "beir")
    assert table["n_qrels"].to_list() == [0] and table["nDCG@10"].to_list() == [None]
    assert "qrels cannot score it" in table["qrels_excluded"][0]


def test_identifiers_and_the_title_threshold(scifact):
    _, corpus, papers, _ = scifact
    matcher = PaperMatcher.from_papers(
        papers.vstack(
            pl.DataFrame(
                [
                    {
                        "paper_id": "doi:10.1/x",
                        "title": "Some DOI paper",
                        "source": "openalex",
                        "source_id": "W1",
                    }
                ]
            )
        )
    )
    assert matcher.match(Context("?", [], doi="10.1/X")).method == "DOI"
    assert matcher.match(Context("?", [], url="https://doi.org/10.1/x")).paper_id == "doi:10.1/x"
    assert (
        matcher.match(Context("?", [], url="https://www.semanticscholar.org/p/13734012")).method
        == "S2 corpus id"
    )
    # the closest two different SciFact titles score 90: the threshold (95) keeps them apart
    rat = matcher.match(Context("The rat brain in stereotaxic coordinates", []))
    mouse = matcher.match(Context("The Mouse Brain in Stereotaxic Coordinates", []))
    assert rat.paper_id != mouse.paper_id and {rat.method, mouse.method} == {"title"}
    assert matcher.match(Context("The hamster brain in stereotaxic coordinates", [])).paper_id is None
    assert matcher.match(Context("Summary", [])).paper_id is None  # several SciFact papers share it
