"""Venue filters by whole words and known venue names (an acronym and its long form, either way), never by
substring: `venue:ACL` matches "ACL 2020" and "... Annual Meeting of the Association for Computational
Linguistics", not "NAACL-HLT"."""

from __future__ import annotations

import functools
import re

_WORD = re.compile(r"[^\W_]+", re.U)

# acronym -> long forms, as proceedings print them (a long form must not be part of another venue's long form:
# ACL's is the Annual Meeting, since "Association for Computational Linguistics" is in NAACL's and EACL's too)
KNOWN_VENUES: dict[str, tuple[str, ...]] = {
    "ACL": ("Annual Meeting of the Association for Computational Linguistics",),
    "NAACL": ("North American Chapter of the Association for Computational Linguistics",),
    "EACL": ("European Chapter of the Association for Computational Linguistics",),
    "AACL": ("Asia-Pacific Chapter of the Association for Computational Linguistics",),
    "EMNLP": ("Empirical Methods in Natural Language Processing",),
    "COLING": ("International Conference on Computational Linguistics",),
    "CoNLL": ("Conference on Computational Natural Language Learning",),
    "TACL": ("Transactions of the Association for Computational Linguistics",),
    "NeurIPS": ("Neural Information Processing Systems", "NIPS"),
    "ICML": ("International Conference on Machine Learning",),
    "ICLR": ("International Conference on Learning Representations",),
    "AAAI": ("AAAI Conference on Artificial Intelligence",),
    "IJCAI": ("International Joint Conference on Artificial Intelligence",),
    "CVPR": ("Conference on Computer Vision and Pattern Recognition",),
    "ICCV": ("International Conference on Computer Vision",),
    "KDD": ("Knowledge Discovery and Data Mining",),
    "SIGIR": ("Research and Development in Information Retrieval",),
    "CIKM": ("Conference on Information and Knowledge Management",),
    "WSDM": ("Web Search and Data Mining",),
    "WWW": ("The Web Conference", "World Wide Web Conference"),
    "JCDL": ("Joint Conference on Digital Libraries",),
    "CHI": ("Conference on Human Factors in Computing Systems",),
    "UIST": ("Symposium on User Interface Software and Technology",),
    "PNAS": ("Proceedings of the National Academy of Sciences",),
    "JAMA": ("Journal of the American Medical Association",),
    "NEJM": ("New England Journal of Medicine",),
}


def words(text: str | None) -> tuple[str, ...]:
    """Lower-case words of a venue name (hyphens, apostrophes and punctuation split words)."""
    return tuple(w.lower() for w in _WORD.findall(text or ""))


@functools.cache
def _names() -> dict[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """Each known name's words -> the words of every name of the same venue (itself included)."""
    by_name: dict[tuple[str, ...], tuple[tuple[str, ...], ...]] = {}
    for acronym, long_forms in KNOWN_VENUES.items():
        group = tuple(words(n) for n in (acronym, *long_forms))
        for name in group:
            by_name[name] = group
    return by_name


def alternatives(wanted: str) -> tuple[tuple[str, ...], ...]:
    """The word runs any of which makes a venue match `wanted`: its own words and, for a known venue name, the
    words of its other names."""
    own = words(wanted)
    if not own:
        return ()
    return tuple(dict.fromkeys((own, *_names().get(own, ()))))


def _contains(haystack: tuple[str, ...], needle: tuple[str, ...]) -> bool:
    n = len(needle)
    return any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


def _spelled_out(have: tuple[str, ...]) -> list[tuple[str, ...]]:
    """A venue's words and the long forms of the known acronyms among them ("NAACL-HLT 2018" is also the North
    American Chapter of the Association for Computational Linguistics)."""
    names = _names()
    return [have] + [name for word in have for name in names.get((word,), ()) if name != (word,)]


def venue_matches(venue: str | None, wanted: str) -> bool:
    """Whether a paper's `venue` is the `wanted` one, by whole words or a known name of the same venue."""
    have = words(venue)
    runs = alternatives(wanted)
    return bool(have) and any(_contains(text, run) for text in _spelled_out(have) for run in runs)


def prefilter_terms(wanted: str) -> list[str]:
    """Lower-case strings one of which a matching venue's text must contain (each alternative's longest word, and the
    acronyms whose long form holds the wanted words): a cheap index-side filter before `venue_matches`."""
    runs = alternatives(wanted)
    acronyms = {
        group[0][0]
        for group in _names().values()
        if len(group[0]) == 1 and any(_contains(name, run) for name in group[1:] for run in runs)
    }
    return sorted({max(run, key=len) for run in runs} | acronyms)
