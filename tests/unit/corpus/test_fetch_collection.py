"""`lumina fetch-collection`: a BEIR archive served from 127.0.0.1 is checked against its checksum, unpacked safely
into a folder the BEIR reader loads, and refused (leaving nothing behind) when the checksum or a member is wrong."""

from __future__ import annotations

import hashlib
import io
import json
import stat
import zipfile
from pathlib import Path

import pytest
from orchestration_servers import static_http_server

from lumina_assets.cli.main import main
from lumina_assets.corpus import fetch
from lumina_assets.corpus.collections import load_beir

CORPUS = [
    {
        "_id": "d1",
        "title": "Vitamin D and fractures",
        "text": "Vitamin D supplementation did not reduce fractures.",
    },
    {"_id": "d2", "title": "Statins", "text": "Statins lower LDL cholesterol in adults."},
]
QUERIES = [
    {"_id": "q1", "text": "does vitamin D prevent fractures"},
    {"_id": "q2", "text": "what do statins do"},
]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n"


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def _zip(members: dict[str, str], *, links: tuple[str, ...] = ()) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in members.items():
            archive.writestr(name, text)
        for name in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "/etc/passwd")
    return buffer.getvalue()


def _beir_members(top: str = "tiny/") -> dict[str, str]:
    return {
        f"{top}corpus.jsonl": _jsonl(CORPUS),
        f"{top}queries.jsonl": _jsonl(QUERIES),
        f"{top}qrels/test.tsv": QRELS,
    }


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> tuple[str, dict[str, bytes]]:
    """Archives on a local HTTP server: a good BEIR zip, one with a `../` member, one with a symbolic link."""
    root = tmp_path_factory.mktemp("archives")
    archives = {
        "tiny.zip": _zip(_beir_members()),
        "escape.zip": _zip({**_beir_members(), "tiny/../../escaped.txt": "outside"}),
        "link.zip": _zip(_beir_members(), links=("tiny/qrels/train.tsv",)),
    }
    for name, data in archives.items():
        (root / name).write_bytes(data)
    with static_http_server(root) as url:
        yield url, archives


def _fetch(url: str, sha256: str, dest: Path, name: str = "tiny") -> int:
    return main(["fetch-collection", name, "--url", url, "--sha256", sha256, "--dest", str(dest)])


def test_checked_archive_unpacks_into_a_collection_the_beir_reader_loads(served, tmp_path, capsys):
    url, archives = served
    dest = tmp_path / "collections"
    assert _fetch(f"{url}/tiny.zip", _sha256(archives["tiny.zip"]), dest) == 0
    out = capsys.readouterr().out
    folder = dest / "tiny"
    assert f"LUMINA_CORPUS={folder.resolve()} make demo" in out
    assert "2 documents, qrels: test" in out
    collection = load_beir(folder, "test")
    assert set(collection.corpus) == {"d1", "d2"}
    assert collection.queries == {"q1": "does vitamin D prevent fractures", "q2": "what do statins do"}
    assert collection.qrels == {"q1": {"d1": 1}, "q2": {"d2": 1}}
    assert sorted(p.name for p in dest.iterdir()) == ["tiny"]  # no staging folder left


def test_a_wrong_checksum_is_refused_and_leaves_nothing(served, tmp_path, capsys):
    url, archives = served
    dest = tmp_path / "collections"
    wrong = _sha256(archives["tiny.zip"] + b"tampered")
    assert _fetch(f"{url}/tiny.zip", wrong, dest) == 1
    err = capsys.readouterr().err
    assert "does not match its published sha256" in err and wrong in err
    assert not dest.exists()

    dest.mkdir()  # an existing destination keeps only what it had
    (dest / "mine.txt").write_text("kept")
    assert _fetch(f"{url}/tiny.zip", wrong, dest) == 1
    assert [p.name for p in dest.iterdir()] == ["mine.txt"]


def test_an_archive_member_leaving_the_destination_is_refused(served, tmp_path, capsys):
    url, archives = served
    dest = tmp_path / "deep" / "collections"
    assert _fetch(f"{url}/escape.zip", _sha256(archives["escape.zip"]), dest) == 1
    assert "unsafe archive member 'tiny/../../escaped.txt'" in capsys.readouterr().err
    assert not (tmp_path / "deep").joinpath("escaped.txt").exists()
    assert not list(tmp_path.rglob("escaped.txt"))
    assert not dest.exists()


def test_a_symbolic_link_member_is_refused(served, tmp_path, capsys):
    url, archives = served
    dest = tmp_path / "collections"
    assert _fetch(f"{url}/link.zip", _sha256(archives["link.zip"]), dest) == 1
    assert "a symbolic link" in capsys.readouterr().err
    assert not dest.exists()


def test_unpacking_stops_at_the_size_limit(tmp_path):
    data = _zip({"big/corpus.jsonl": "x" * 10_000})
    with pytest.raises(fetch.FetchError, match="more than the size limit"):
        fetch.unpack_archive(data, tmp_path, max_bytes=4_096)
    assert not list(tmp_path.rglob("corpus.jsonl"))  # refused on the declared sizes, before a byte is written


def test_a_zip_bomb_is_refused_before_it_is_written(tmp_path):
    """Before: a 5 MB bomb wrote 4 GiB (the total cap) before it was refused."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("bomb/corpus.jsonl", b"\0" * (64 << 20))
    data = buffer.getvalue()
    assert len(data) < 200_000
    with pytest.raises(fetch.FetchError, match="decompression bomb"):
        fetch.unpack_archive(data, tmp_path / "out")
    assert not list(tmp_path.rglob("corpus.jsonl"))


@pytest.mark.parametrize(
    "members",
    [
        {
            "tiny/corpus.jsonl": "x",
            "tiny/corpus.jsonl/inner.txt": "y",
        },  # a file where a folder must go: Errno 17/20
        {"tiny/" + "n" * 300 + ".jsonl": "x"},  # a name too long: Errno 36
    ],
)
def test_file_system_errors_are_said_without_errno_or_the_staging_folder(members, served, tmp_path, capsys):
    url, _ = served
    data = _zip(members)
    (tmp_path / "bad.zip").write_bytes(data)
    with pytest.raises(fetch.FetchError) as caught:
        fetch.unpack_archive(data, tmp_path / "staging-folder")
    message = str(caught.value)
    assert message.startswith("cannot unpack 'tiny/") and "[Errno" not in message
    assert "staging-folder" not in message


def test_url_secrets_are_never_printed(served, tmp_path, capsys):
    url, archives = served
    secret_url = f"{url}/tiny.zip?api_key=SECRET-KEY-1&token=SECRET-TOKEN-2&v=1"
    assert _fetch(secret_url, _sha256(b"other"), tmp_path / "collections") == 1
    printed = capsys.readouterr()
    text = printed.out + printed.err
    assert "does not match" in text and "Fetching tiny from" in text
    assert "SECRET-KEY-1" not in text and "SECRET-TOKEN-2" not in text and "v=1" in text


def test_an_existing_collection_is_kept_unless_replaced(served, tmp_path, capsys):
    url, archives = served
    dest = tmp_path / "collections"
    (dest / "tiny").mkdir(parents=True)
    (dest / "tiny" / "corpus.jsonl").write_text("{}\n")
    assert _fetch(f"{url}/tiny.zip", "0" * 64, dest) == 0  # not downloaded, so the checksum is never asked
    assert "already in" in capsys.readouterr().out
    assert (dest / "tiny" / "corpus.jsonl").read_text() == "{}\n"
    args = ["fetch-collection", "tiny", "--url", f"{url}/tiny.zip", "--sha256", _sha256(archives["tiny.zip"])]
    assert main([*args, "--dest", str(dest), "--replace"]) == 0
    assert len(load_beir(dest / "tiny", "test").corpus) == 2


def test_known_collections_are_published_archives_with_their_checksums():
    scifact = fetch.known_collection("scifact")
    assert scifact.url == "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip"
    assert scifact.md5 == "5f7d1de60b170fc8027bb7898e2efca1"
    for collection in fetch.KNOWN_COLLECTIONS.values():
        assert collection.url.startswith("https://") and collection.md5
    with pytest.raises(fetch.FetchError, match="unknown collection 'nope'"):
        fetch.known_collection("nope")
    with pytest.raises(fetch.FetchError, match="no checksum"):
        fetch.KnownCollection("mine", "https://example.org/mine.zip")
    with pytest.raises(fetch.FetchError, match="64 hexadecimal digits"):
        fetch.KnownCollection("mine", "https://example.org/mine.zip", sha256="abc")


def test_a_url_without_a_checksum_is_refused_before_any_request(tmp_path, capsys):
    rc = main(
        ["fetch-collection", "mine", "--url", "http://127.0.0.1:9/x.zip", "--dest", str(tmp_path / "c")]
    )
    assert rc == 2
    assert "--url and --sha256 go together" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()
