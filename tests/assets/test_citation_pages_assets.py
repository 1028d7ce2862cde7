"""Pages and arXiv classes through the real asset path: a Zotero data folder (Zotero's own schema) whose items hold
pages, and two shared PDFs attached to them, go local_papers -> papers -> parsing -> passage_index; a search over the
index is exported as BibTeX (read back by pybtex) and RIS (read back by rispy). The hashing test embedder keeps it
fast."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pytest
import rispy
from hashing_embedder import HashingEmbedder
from pybtex.database import parse_string
from zotero_db import ZoteroDatabase

from lumina_assets.core import settings, tables
from lumina_assets.search.citation_export import to_bibtex, to_ris
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine
from lumina_assets.search.request import SearchRequest
from lumina_assets.search.results import SearchService
from resources.embedder import EmbedderResource

AMMAR, SHEN = "doi:10.18653/v1/n18-3011", "arxiv:2304.02623"


class HashingEmbedderResource(EmbedderResource):
    def get_embedder(self):
        return HashingEmbedder()

    def setup_for_execution(self, context) -> None:
        return None


def data_folder(shared_data: Path, folder: Path) -> Path:
    """Ammar et al. with pages "84-91" typed in Zotero and N18-3011.pdf attached; Shen et al. with no pages and its
    arXiv PDF attached (stamped "arXiv:2304.02623v1 [cs.CL]")."""
    for key, name in (("PDFAMMAR", "N18-3011.pdf"), ("PDFSHEN1", "2304.02623v1.pdf")):
        (folder / "storage" / key).mkdir(parents=True)
        shutil.copyfile(shared_data / "pdfs" / name, folder / "storage" / key / name)
    z = ZoteroDatabase(folder / "zotero.sqlite")
    ammar = z.item(
        "conferencePaper",
        "AMMAR001",
        title="Construction of the Literature Graph in Semantic Scholar",
        date="2018-06-00 June 2018",
        DOI="10.18653/v1/N18-3011",
        proceedingsTitle="Proceedings of NAACL-HLT",
        pages="84-91",
    )
    z.creators(ammar, ("Waleed", "Ammar"), ("Dirk", "Groeneveld"))
    z.attach(ammar, "PDFAMMAR", "storage:N18-3011.pdf")
    shen = z.item(
        "preprint",
        "SHEN0001",
        title="Beyond Summarization: Designing AI Support for Real-World Expository Writing Tasks",
        date="2023-04-05",
        url="http://arxiv.org/abs/2304.02623",
        extra="arXiv: 2304.02623",
    )
    z.creators(shen, ("Zejiang", "Shen"), ("Kyle", "Lo"))
    z.attach(shen, "PDFSHEN1", "storage:2304.02623v1.pdf")
    z.close()
    return folder


def materialize(assets, resources, instance, selection, partition=None):
    result = dg.materialize(
        assets, selection=selection, resources=resources, instance=instance, partition_key=partition
    )
    assert result.success


@pytest.mark.slow
def test_zotero_pages_and_arxiv_class_reach_exported_files(tmp_path, shared_data, monkeypatch):
    from lumina_assets.defs import corpus, parsing
    from lumina_assets.defs import indexing as index

    monkeypatch.setenv("LUMINA_CORPUS", str(data_folder(shared_data, tmp_path / "Zotero")))
    assets, resources = [], {}
    for stage in (corpus, parsing, index):
        assets += stage.ASSETS
        resources.update(stage.build_resources())
    resources["embedder"] = HashingEmbedderResource()
    instance = dg.DagsterInstance.ephemeral()
    materialize(assets, resources, instance, ["local_papers", "papers"])
    [batch] = instance.get_dynamic_partitions("ingest_batches")
    materialize(assets, resources, instance, ["pdf_files", "parsed_papers", "passages"], batch)
    materialize(assets, resources, instance, ["passage_index"])

    papers = {row["paper_id"]: row for row in tables.read(tables.PAPERS).iter_rows(named=True)}
    assert papers[AMMAR]["pages"] == "84--91" and "pages:zotero" in papers[AMMAR]["metadata_sources"]
    assert papers[SHEN]["pages"] is None and papers[SHEN]["arxiv_primary_class"] == "cs.CL"

    service = SearchService(
        lambda: SearchEngine(settings.lancedb_uri(), HashingEmbedder(), SearchConfig()), pool_size=1
    )
    results = {}
    for query in ("literature graph semantic scholar", "expository writing support"):
        for result in service.search(SearchRequest(query, k=10, overview=False))["results"]:
            results.setdefault(result["paper_id"], result)
    assert {AMMAR, SHEN} <= set(results)
    found = [results[AMMAR], results[SHEN]]
    ammar_entry, shen_entry = parse_string(to_bibtex(found), "bibtex").entries.values()
    assert ammar_entry.fields["pages"] == "84--91" and "eprint" not in ammar_entry.fields
    assert "pages" not in shen_entry.fields
    assert (shen_entry.fields["eprint"], shen_entry.fields["archivePrefix"]) == ("2304.02623", "arXiv")
    assert shen_entry.fields["primaryClass"] == "cs.CL"
    ammar_record, shen_record = rispy.loads(to_ris(found))
    assert (ammar_record["start_page"], ammar_record["end_page"]) == ("84", "91")
    assert shen_record["accession_number"] == "arXiv:2304.02623" and "start_page" not in shen_record
    # one paper's citation (the page's "copy BibTeX", GET /api/papers/{id}/export) carries them too
    (single,) = parse_string(to_bibtex([service.paper(SHEN)]), "bibtex").entries.values()
    assert (single.fields["eprint"], single.fields["primaryClass"]) == ("2304.02623", "cs.CL")
    (single,) = parse_string(to_bibtex([service.paper(AMMAR)]), "bibtex").entries.values()
    assert single.fields["pages"] == "84--91"
