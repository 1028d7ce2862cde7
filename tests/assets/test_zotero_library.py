"""A Zotero library as a catalogue source: a hand-written export in Zotero's BibTeX format with two real PDFs goes
through the real asset path (local_papers -> papers -> parsing -> passage_index) and is searchable by its tags and
collections; the library's metadata wins over what the PDFs print. The hashing test embedder keeps it fast."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pytest
from hashing_embedder import HashingEmbedder

from lumina_assets.core import settings, tables
from lumina_assets.corpus import catalogue
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine
from lumina_assets.search.request import SearchRequest
from resources.embedder import EmbedderResource

N18 = "N18-3011.pdf"  # Ammar et al. 2018, the literature graph (8 pages)
SHEN = "2304.02623v1.pdf"  # Shen et al. 2023, AI support for expository writing (4 pages)

# As Zotero 7 writes it with "Export Files" ticked: files/<attachment id>/<name>, `description:path:mime type`
ZOTERO_BIBTEX = r"""
@inproceedings{ammar_construction_2018,
	address = {New Orleans - Louisiana},
	title = {Construction of the {Literature} {Graph} in {Semantic} {Scholar}},
	url = {https://aclanthology.org/N18-3011},
	doi = {10.18653/v1/N18-3011},
	booktitle = {Proceedings of the 2018 {Conference} of the {North} {American} {Chapter} of the {Association} for {Computational} {Linguistics}},
	publisher = {Association for Computational Linguistics},
	author = {Ammar, Waleed and Groeneveld, Dirk and Bhagavatula, Chandra and Beltagy, Iz},
	year = {2018},
	keywords = {knowledge graphs, to-read},
	groups = {Thesis/Related work},
	pages = {84--91},
	file = {Full Text PDF:files/4/Ammar et al. - 2018 - Construction of the Literature Graph in Semantic Scholar.pdf:application/pdf},
}

@misc{shen_beyond_2023,
	title = {Beyond {Summarization}: {Designing} {AI} {Support} for {Real}-{World} {Expository} {Writing} {Tasks}},
	shorttitle = {Beyond {Summarization}},
	url = {http://arxiv.org/abs/2304.02623},
	doi = {10.48550/arXiv.2304.02623},
	publisher = {arXiv},
	author = {Shen, Zejiang and Knearem, Tal and Ghosh, Reuben and Lo, Kyle},
	month = apr,
	year = {2023},
	note = {arXiv:2304.02623 [cs]},
	keywords = {writing assistance, to-read},
	file = {arXiv Fulltext PDF:files/7/Shen et al. - 2023 - Beyond Summarization.pdf:application/pdf;arXiv.org Snapshot:files/8/2304.html:text/html},
}

@article{cohan_specter_2020,
	title = {{SPECTER}: {Document}-level {Representation} {Learning} using {Citation}-informed {Transformers}},
	journal = {Proceedings of ACL},
	author = {Cohan, Arman and Feldman, Sergey},
	year = {2020},
	abstract = {Representation learning is a critical ingredient for natural language processing systems. We propose SPECTER, a new method to generate document-level embedding of scientific papers based on pretraining a Transformer language model on the citation graph.},
	keywords = {embeddings},
}
"""


class HashingEmbedderResource(EmbedderResource):
    def get_embedder(self):
        return HashingEmbedder()

    def setup_for_execution(self, context) -> None:
        return None


def make_export(shared_data: Path, root: Path) -> Path:
    """A Zotero export folder: the .bib beside `files/` holding the attached PDFs."""
    (root / "files" / "4").mkdir(parents=True)
    (root / "files" / "7").mkdir(parents=True)
    shutil.copyfile(
        shared_data / "pdfs" / N18,
        root / "files/4/Ammar et al. - 2018 - Construction of the Literature Graph in Semantic Scholar.pdf",
    )
    shutil.copyfile(
        shared_data / "pdfs" / SHEN, root / "files/7/Shen et al. - 2023 - Beyond Summarization.pdf"
    )
    export = root / "My Library.bib"
    export.write_text(ZOTERO_BIBTEX, encoding="utf-8")
    return export


def pipeline():
    from lumina_assets.defs import corpus, parsing
    from lumina_assets.defs import indexing as index

    assets, resources = [], {}
    for stage in (corpus, parsing, index):
        assets += stage.ASSETS
        resources.update(stage.build_resources())
    resources["embedder"] = HashingEmbedderResource()
    return assets, resources


def materialize(assets, resources, instance, selection, partition=None):
    result = dg.materialize(
        assets, selection=selection, resources=resources, instance=instance, partition_key=partition
    )
    assert result.success
    return result


def search(query: str, **filters) -> list[str]:
    request = SearchRequest.from_mapping({"query": query, "k": 10, **filters})
    engine = SearchEngine(settings.lancedb_uri(), HashingEmbedder(), SearchConfig(), refresh_seconds=0)
    return [c.paper_id for c in engine.search(request.engine_query(), k=request.k)]


@pytest.mark.slow
def test_zotero_export_is_imported_and_searchable_by_tag(tmp_path, shared_data, monkeypatch):
    export = make_export(shared_data, tmp_path / "zotero-export")
    monkeypatch.setenv("LUMINA_CORPUS", f"zotero:{export}")
    assets, resources = pipeline()
    instance = dg.DagsterInstance.ephemeral()
    materialize(assets, resources, instance, ["local_papers", "papers"])
    [batch] = instance.get_dynamic_partitions("ingest_batches")
    materialize(assets, resources, instance, ["pdf_files", "parsed_papers", "passages"], batch)
    materialize(assets, resources, instance, ["passage_index"])

    papers = {row["paper_id"]: row for row in tables.read(tables.PAPERS).iter_rows(named=True)}
    ammar, shen = "doi:10.18653/v1/n18-3011", "arxiv:2304.02623"
    assert set(papers) == {ammar, shen, "zotero-My Library:cohan_specter_2020"}
    # the library's metadata wins over the PDF's, and says so
    assert papers[ammar]["authors"] == [
        "Waleed Ammar",
        "Dirk Groeneveld",
        "Chandra Bhagavatula",
        "Iz Beltagy",
    ]
    assert papers[ammar]["title"] == "Construction of the Literature Graph in Semantic Scholar"
    assert papers[ammar]["year"] == 2018 and papers[ammar]["venue"].startswith("Proceedings of the 2018")
    assert {"title:zotero", "authors:zotero", "doi:zotero", "tags:zotero"} <= set(
        papers[ammar]["metadata_sources"]
    )
    assert papers[ammar]["tags"] == ["knowledge graphs", "to-read"]
    assert papers[ammar]["collections"] == ["Thesis/Related work"]
    assert papers[ammar]["local_path"].endswith(
        "Construction of the Literature Graph in Semantic Scholar.pdf"
    )
    assert papers[shen]["year"] == 2023 and papers[shen]["local_path"]
    # an item without a PDF enters with its abstract
    specter = papers["zotero-My Library:cohan_specter_2020"]
    assert specter["local_path"] is None and specter["abstract"].startswith("Representation learning")
    # the catalogue records the library as its own origin, which `lumina prune --source` names
    origins = catalogue.origin_counts(catalogue.read_records())
    origin = f"zotero:{export.resolve()}"
    assert origins == {origin: 3}
    assert catalogue.resolve_origin(f"zotero:{export}", list(origins)) == origin
    assert catalogue.resolve_origin(str(export), list(origins)) == origin

    # searchable by tag and collection: only the library's papers with that label come back
    assert set(search("semantic scholar literature graph writing")) >= {ammar, shen}
    assert search("semantic scholar literature graph writing", tag="knowledge graphs") == [ammar]
    assert search("semantic scholar literature graph writing", tag="Writing Assistance") == [shen]
    assert set(search("graph writing citation", tag="to-read")) == {ammar, shen}
    assert search("graph writing citation", collection="Thesis") == [ammar]
    assert search("graph writing citation", collection="thesis/related work") == [ammar]
    assert search("graph writing citation", tag="no such tag") == []
    # typed syntax does the same
    engine = SearchEngine(settings.lancedb_uri(), HashingEmbedder(), SearchConfig(), refresh_seconds=0)
    assert [c.paper_id for c in engine.search('literature graph tag:"writing assistance"', k=10)] == [shen]
    assert [c.paper_id for c in engine.search("embeddings tag:embeddings", k=10)] == [
        "zotero-My Library:cohan_specter_2020"
    ]
