"""Structure-quality measures of one parse against a reference parse (GROBID TEI): used by `bench/parse.py` and
the parser tests, so the figures reported and the figures tested are the same computation."""

from __future__ import annotations

import re
from dataclasses import dataclass

from lumina_assets.core.schemas import ParsedPaper


def normalize_title(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", title.lower()).strip()


def title_found(reference: str, candidates: list[str]) -> bool:
    """A reference title is found when a candidate equals it, or one contains the other (GROBID sometimes glues
    two headings, "Model 2.1 Overview"; a layout parser sometimes splits them)."""
    ref = normalize_title(reference)
    if not ref:
        return False
    for candidate in candidates:
        cand = normalize_title(candidate)
        if not cand:
            continue
        if cand == ref or (len(cand) >= 4 and cand in ref) or (len(ref) >= 4 and ref in cand):
            return True
    return False


@dataclass
class StructureScore:
    reference_titles: int
    titles_found: int
    reference_entries: int
    entries_found: int

    @property
    def title_recall(self) -> float:
        return self.titles_found / self.reference_titles if self.reference_titles else 0.0


def compare_structure(parsed: ParsedPaper, reference: ParsedPaper) -> StructureScore:
    """Share of the reference's (non-empty) section titles that `parsed` also has, and bibliography sizes."""
    reference_titles = [s.title for s in reference.sections if normalize_title(s.title)]
    candidates = [s.title for s in parsed.sections]
    found = sum(1 for title in reference_titles if title_found(title, candidates))
    return StructureScore(
        reference_titles=len(reference_titles),
        titles_found=found,
        reference_entries=len(reference.references),
        entries_found=len(parsed.references),
    )
