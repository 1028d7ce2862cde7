"""Fetch a published BEIR collection into a folder `LUMINA_CORPUS` can name. The archive must match its published
checksum before anything is written, is unpacked member by member in a staging folder (no absolute paths, `..` or
links; bounded count and size), and is moved into place only when whole."""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import stat
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from lumina_assets.core.http import HttpClient, HttpError
from lumina_assets.core.url_safety import redact_url
from lumina_assets.corpus.collections import available_splits, is_beir_corpus, is_beir_queries

# the archive is held in memory to be checked before anything is written
MAX_DOWNLOAD_BYTES = 512 * 1024 * 1024
MAX_UNPACKED_BYTES = 4 * 1024 * 1024 * 1024  # a zip bomb stops here, whatever its members declare
MAX_MEMBERS = 10_000  # a BEIR archive holds a handful of files
MAX_RATIO = 100  # JSON text deflates about 4:1; a member declaring more than this is a bomb
DOWNLOAD_DEADLINE_SECONDS = 1800.0
COLLECTION_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


class FetchError(RuntimeError):
    """The collection could not be fetched: unknown name, failed download, checksum mismatch or unsafe archive."""


@dataclass(frozen=True)
class KnownCollection:
    """Where an archive lives and the checksums it must match. At least one checksum is required."""

    name: str
    url: str
    md5: str | None = None
    sha256: str | None = None
    about: str = ""

    def __post_init__(self) -> None:
        if not COLLECTION_NAME.match(self.name):
            raise FetchError(
                f"{self.name!r} is not a usable collection name (lower-case letters, digits, . _ -)"
            )
        if not (self.md5 or self.sha256):
            raise FetchError(f"{self.name}: no checksum to verify {self.url} against")
        for label, digest, length in (("md5", self.md5, 32), ("sha256", self.sha256, 64)):
            if digest and not re.fullmatch(rf"[0-9a-fA-F]{{{length}}}", digest):
                raise FetchError(f"{self.name}: {label} must be {length} hexadecimal digits, got {digest!r}")


BEIR_DATASETS = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets"

# URLs and md5 sums as BEIR's README publishes them; scifact's SHA-256 as several public projects pin it.
KNOWN_COLLECTIONS: dict[str, KnownCollection] = {
    collection.name: collection
    for collection in (
        KnownCollection(
            "scifact",
            f"{BEIR_DATASETS}/scifact.zip",
            md5="5f7d1de60b170fc8027bb7898e2efca1",
            sha256="536e14446a0ba56ed1398ab1055f39fe852686ecad24a6306c80c490fa8e0165",
            about="5,183 scientific abstracts, claims with train and test qrels",
        ),
        KnownCollection(
            "nfcorpus",
            f"{BEIR_DATASETS}/nfcorpus.zip",
            md5="a89dba18a62ef92f7d323ec890a0d38d",
            about="3.6K medical abstracts, train / dev / test qrels",
        ),
        KnownCollection(
            "scidocs",
            f"{BEIR_DATASETS}/scidocs.zip",
            md5="38121350fc3a4d2f48850f6aff52e4a9",
            about="25K scientific paper abstracts, test qrels",
        ),
        KnownCollection(
            "trec-covid",
            f"{BEIR_DATASETS}/trec-covid.zip",
            md5="ce62140cb23feb9becf6270d0d1fe6d1",
            about="171K COVID-19 articles (CORD-19), test qrels",
        ),
    )
}


def known_collection(name: str) -> KnownCollection:
    """The table's entry for `name`, or FetchError listing the names there are."""
    try:
        return KNOWN_COLLECTIONS[name]
    except KeyError:
        raise FetchError(
            f"unknown collection {name!r}; known: {', '.join(sorted(KNOWN_COLLECTIONS))} "
            "(another archive: --url with --sha256)"
        ) from None


def check_archive(data: bytes, collection: KnownCollection) -> None:
    """FetchError unless `data` matches every checksum the collection names."""
    expected = {"md5": collection.md5, "sha256": collection.sha256}
    for algorithm, digest in expected.items():
        if not digest:
            continue
        actual = hashlib.new(algorithm, data, usedforsecurity=False).hexdigest()
        if actual != digest.lower():
            raise FetchError(
                f"{collection.name}: the archive from {shown_url(collection.url)} does not match its published {algorithm} "
                f"(expected {digest.lower()}, got {actual}); nothing was unpacked"
            )


def shown_url(url: str) -> str:
    """The URL as messages show it: secret query values (`api_key`, `token` ...) redacted as the HTTP layer does."""
    try:
        return redact_url(url)
    except ValueError:
        return url.split("?", 1)[0] + "?…"


def _member_path(info: zipfile.ZipInfo) -> PurePosixPath | None:
    """The member's relative path, None for a directory entry; FetchError for a name that would leave the folder."""
    name = info.filename
    path = PurePosixPath(name)
    if (
        not name
        or "\\" in name
        or "\x00" in name
        or path.is_absolute()
        or re.match(r"^[A-Za-z]:", name)
        or any(part in ("..", "") for part in name.rstrip("/").split("/"))
    ):
        raise FetchError(f"unsafe archive member {name!r}: it would be written outside the destination")
    if stat.S_ISLNK(info.external_attr >> 16):
        raise FetchError(f"unsafe archive member {name!r}: a symbolic link")
    return None if info.is_dir() else path


def unpack_archive(data: bytes, target: Path, *, max_bytes: int = MAX_UNPACKED_BYTES) -> None:
    """Every member of the zip in `data` under `target`, refusing unsafe names, links and more than `max_bytes`
    written (counted while writing, not trusted from the archive's own sizes). All names are checked first."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise FetchError(f"not a zip archive ({exc})") from None
    with archive:
        members = archive.infolist()
        if len(members) > MAX_MEMBERS:
            raise FetchError(f"the archive has {len(members)} members, over the limit of {MAX_MEMBERS}")
        files = [(info, path) for info in members if (path := _member_path(info)) is not None]
        declared = sum(info.file_size for info, _ in files)
        if declared > max_bytes:
            raise FetchError(
                f"the archive unpacks to more than the size limit ({declared:,} bytes declared, limit "
                f"{max_bytes:,}); refused before writing"
            )
        for info, _ in files:
            if info.file_size > MAX_RATIO * max(info.compress_size, 1) + (1 << 20):
                raise FetchError(
                    f"archive member {info.filename!r} inflates {info.file_size // max(info.compress_size, 1):,} "
                    f"times (a decompression bomb); refused"
                )
        written = 0
        root = target.resolve()
        for info, path in files:
            destination = root.joinpath(*path.parts)
            if not destination.resolve().is_relative_to(root):
                raise FetchError(
                    f"unsafe archive member {info.filename!r}: it resolves outside the destination"
                )
            try:
                destination.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:  # a file where a folder must go: named without the staging path
                raise FetchError(f"cannot unpack {info.filename!r} ({exc.strerror or exc})") from None
            written += _copy_member(archive, info, destination, max_bytes - written)


def _copy_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, destination: Path, budget: int) -> int:
    """Write one member, at most `budget` bytes of it and never more than it declares (a member that inflates
    past its declared size is refused as soon as it does); the bytes written."""
    written = 0
    budget = min(budget, info.file_size)
    try:
        with archive.open(info) as source, destination.open("xb") as sink:
            while block := source.read(1 << 20):
                written += len(block)
                if written > budget:
                    break
                sink.write(block)
    except FileExistsError:
        raise FetchError(f"the archive holds {info.filename!r} twice") from None
    except OSError as exc:  # a name too long, a full disk: said without the staging folder's path
        raise FetchError(f"cannot unpack {info.filename!r} ({exc.strerror or exc})") from None
    # RuntimeError: an encrypted member
    except (zipfile.BadZipFile, RuntimeError, NotImplementedError, EOFError) as exc:
        raise FetchError(f"cannot unpack {info.filename!r} ({exc})") from None
    if written > budget:
        raise FetchError("the archive unpacks to more than the size limit; refused")
    return written


def collection_root(unpacked: Path) -> Path:
    """The folder holding corpus.jsonl: the unpacked folder itself or its one top-level folder (BEIR zips hold
    `<name>/corpus.jsonl`); FetchError when the archive is not a BEIR collection."""
    candidates = [unpacked, *(child for child in sorted(unpacked.iterdir()) if child.is_dir())]
    for candidate in candidates:
        if is_beir_corpus(candidate):
            if not is_beir_queries(candidate):
                raise FetchError("the archive has corpus.jsonl but no queries.jsonl and qrels/ beside it")
            return candidate
    raise FetchError("the archive is not a BEIR collection: no corpus.jsonl at its top or in its top folder")


def download(collection: KnownCollection) -> bytes:
    try:
        with HttpClient(
            timeout=60.0, deadline=DOWNLOAD_DEADLINE_SECONDS, max_bytes=MAX_DOWNLOAD_BYTES, max_retries=2
        ) as client:
            return client.get(collection.url, use_cache=False).content
    except HttpError as exc:
        raise FetchError(f"{collection.name}: download failed: {exc}") from None  # HttpError redacts its URL


def fetch_collection(collection: KnownCollection, dest: Path, *, replace: bool = False) -> Path:
    """Download, verify and unpack `collection` into `dest/<name>`, returned. An existing folder is kept (and
    returned) unless `replace`; on any failure nothing is left in `dest` that was not there before."""
    final = Path(dest) / collection.name
    if final.exists() and not replace:
        return final
    data = download(collection)
    check_archive(data, collection)
    made_dest = not Path(dest).exists()
    try:
        Path(dest).mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{collection.name}-", dir=dest))
    except OSError as exc:
        raise FetchError(f"cannot write into {dest} ({exc.strerror or exc})") from None
    previous = staging / "replaced"  # with `replace`, the old folder waits here and is removed with staging
    try:
        unpacked = staging / "unpacked"
        unpacked.mkdir()
        unpack_archive(data, unpacked)
        root = collection_root(unpacked)
        if final.exists():
            os.replace(final, previous)
        os.replace(root, final)
    except BaseException:
        if previous.exists() and not final.exists():
            os.replace(previous, final)
        if made_dest:
            shutil.rmtree(dest, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


def describe(folder: Path) -> str:
    """`5,183 documents, qrels: test, train` for the fetched folder."""
    with (folder / "corpus.jsonl").open("rb") as handle:
        documents = sum(1 for line in handle if line.strip())
    return f"{documents:,} documents, qrels: {', '.join(available_splits(folder)) or 'none'}"
