"""README is a front door and docs/ holds the rest: README stays small, every relative link and anchor in README and
docs/*.md resolves, nothing points users at the CI-only ../shared folder, and nothing speaks of project-internal
issues, sessions or notes (users never see them)."""

from __future__ import annotations

import html
import re
import unicodedata
from pathlib import Path

import pytest

from lumina_assets.core.settings import PROJECT_ROOT

README = PROJECT_ROOT / "README.md"
DOCS = sorted((PROJECT_ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
README_MAX_BYTES = 15_360

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
# Words that only make sense inside the project's own tracker: any "issue(s)", any "session(s)", "notes", and
# "note" after a word that makes it a document ("the note", "see note", "issue note"). "Note that" stays allowed.
INTERNAL = re.compile(
    r"\bissues?\b|\bsessions?\b|\bnotes\b|\b(?:the|see|in|our|my|these|those|issue|session|lab|tracker)\s+notes?\b",
    re.I,
)


def _id(path: Path) -> str:
    return str(path.relative_to(PROJECT_ROOT))


def _prose(text: str) -> str:
    """Text as a reader sees it: entities decoded, compatibility forms folded, invisible characters and markdown
    emphasis or escapes inside words removed, so `i&#115;sue`, `is\u00adsue`, `is**sue**` or `is\\sue` read as one
    word."""
    text = unicodedata.normalize("NFKC", html.unescape(text))
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    return re.sub(r"(?<=\w)[*\\]+(?=\w)|(?<=\w)[*\\]+(?=\s|$)", "", text)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    anchors: set[str] = set()
    for heading in HEADING.findall(text):
        slug, n = _slug(heading), 1
        while slug in anchors:  # GitHub numbers repeated headings: slug, slug-1, slug-2 ...
            slug = f"{_slug(heading)}-{n}"
            n += 1
        anchors.add(slug)
    return anchors


def _links(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return LINK.findall(INLINE_CODE.sub("", text))


def test_readme_is_a_front_door_of_at_most_15_kb():
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, (
        f"README.md is {size} bytes; move detail to docs/ (limit {README_MAX_BYTES})"
    )


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_relative_link_and_anchor_resolves(page):
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto: ...
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (page.parent / file_part).resolve() if file_part else page
        if not resolved.exists():
            broken.append(f"{target}: no file {resolved}")
        elif anchor and resolved.suffix == ".md" and anchor.lower() not in _anchors(resolved):
            broken.append(f"{target}: no heading with anchor #{anchor} in {_id(resolved)}")
    assert not broken, f"{_id(page)}:\n" + "\n".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_no_text_refers_to_project_issues_sessions_or_notes(page):
    lines = _prose(page.read_text(encoding="utf-8")).splitlines()
    found = [f"{number}: {line.strip()}" for number, line in enumerate(lines, 1) if INTERNAL.search(line)]
    assert not found, (
        f"{_id(page)} speaks of issues / sessions / notes, which users never see:\n" + "\n".join(found)
    )


def test_readme_never_points_at_the_ci_only_shared_folder():
    text = _prose(README.read_text(encoding="utf-8"))
    assert not re.search(r"\.\./+shared\b|\bshared/data\b", text), "README must not send users to ../shared"


def test_every_docs_page_is_reachable_from_readme():
    """Following links from README (through other pages too) reaches every docs page."""
    reached, todo = {README.resolve()}, [README]
    while todo:
        page = todo.pop()
        for target in _links(page):
            path = (page.parent / target.partition("#")[0]).resolve()
            if path.suffix == ".md" and path.is_file() and path not in reached:
                reached.add(path)
                todo.append(path)
    unreachable = [_id(page) for page in DOCS if page.resolve() not in reached]
    assert not unreachable, f"docs pages no link from README leads to: {unreachable}"


def test_the_checks_catch_what_they_are_for():
    """The patterns themselves: disguised words are caught, ordinary prose passes, anchors follow GitHub."""
    for text in ("see the issue", "Issue 11", "is&#115;ue 3", "is\u00adsue", "is**sue**", "the notes", "lab note",
                 "this session's figures", "ＩＳＳＵＥ"):  # fmt: skip
        assert INTERNAL.search(_prose(text)), text
    for text in ("Note that the index is rebuilt", "issued by the API", "start_new_session", "a notebook"):
        assert not INTERNAL.search(_prose(text)), text
    assert _slug("Search API and web page (`lumina serve`)") == "search-api-and-web-page-lumina-serve"
    assert _slug("10 M and 100 M passages") == "10-m-and-100-m-passages"
    assert LINK.findall("[a](docs/x.md#y) ![img](pic.png) `[not](code.md)`") == [
        "docs/x.md#y",
        "pic.png",
        "code.md",
    ]
