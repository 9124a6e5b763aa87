"""Finding the target column in a prompt: exact names, word forms, flag prefixes,
abbreviations, Chinese words, synonyms, typos and partial names, each scored.

A column is chosen when the prompt names it clearly, or when one column stands out among
the ones it may mean (a plural, a phrase, one word of a longer name): that pick is said
loudly in the plan's notes. Two columns named about equally well make planning fail with
the candidates listed — never a silent pick.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from mlpilot.platform.errors import PlanError
from mlpilot.platform.llm.offline import _forms as forms
from mlpilot.platform.llm.offline._text import allowed_typos, damerau
from mlpilot.platform.ml.profile import ColumnProfile, DataProfile

log = logging.getLogger(__name__)

CONCEPTS = forms.CONCEPTS  # kept importable under its old name
# Words after which the next column mention is the thing to predict: strong cues name
# the target ("predict", "what drives"); weak ones are prepositions that often do.
_STRONG = (
    r"predict(ing|s|ion|ions)?( of| for| on| how much| how many)?|forecast(ing|s)?|target( column| variable| is|=)?|estimat(e|ing)|classify(ing)?|model(ing)?|"
    r"explain(ing)?|driv(ing|ers? of|es)|affect(s|ing)?|influenc(e|es|ing)|determin(e|es|ing)|impact(s|ing)?|regress(ing)?|label(=| is)?|y=|detect(ing)?|"
    r"预测|影响|目标|决定|解释|关于|检测|识别"
)
_WEAK = r"for|on|of"
_FILLER = (
    r"\s*((whether|if|which|who|what) ([a-z']+ ){0,3})?"  # "predict whether a loan defaulted"
    r"(the |a |an |customer |customers' |will |would |客户|用户|是否|能否|会不会)*"
    r"([a-z]+ )?$"  # one modifier: "predict employee turnover", "model hospital readmissions"
)
#: a name followed by what is built for it: "attrition model", "price prediction"
AFTER_CUE = re.compile(
    r"\s*(model|classifier|regressor|prediction|predictor|forecast|forecasting|estimate)s?(?![a-z])"
    r"|\s*(预测|模型)"
)
STRONG_CUE = re.compile(rf"(?<![a-z])({_STRONG}){_FILLER}")
WEAK_CUE = re.compile(rf"(?<![a-z])({_WEAK}){_FILLER}")
#: how a mention was found → its base score (a cue before it adds 2)
SCORES = {
    "form": 2.6,
    "core": 2.45,
    "bag": 2.4,
    "related": 2.3,
    "initials": 2.2,
    "concept-partial": 1.5,
    "subject": 1.6,
    "synonym": 1.8,
    "typo": 1.0,
    "partial-head": 0.9,
    "partial": 0.5,
}
#: kinds of mention that name a column only when a cue such as "predict" comes before them
_NEEDS_CUE = frozenset({"concept-partial", "synonym", "partial-head"})
TIE_MARGIN = 0.1
#: how far ahead of the next candidate a column named only by a guess must be to be used
STANDOUT_MARGIN = 1.0


@dataclass
class Mention:
    column: str
    start: int
    score: float
    cue: int = 0  # 2 after a strong cue ("predict"), 1 after a weak one ("for"), else 0
    end: int = -1
    how: str = "exact"

    def __post_init__(self) -> None:
        if self.end < 0:
            self.end = self.start + 1

    @property
    def cued(self) -> bool:
        return self.cue > 0

    @property
    def level(self) -> int:
        """0: the column is named; 1: suggested (counts after a cue); 2: a guess."""
        if self.how in ("partial", "subject"):
            return 2
        return 1 if self.how in _NEEDS_CUE else 0


@dataclass(frozen=True)
class Token:
    word: str
    stem: str
    start: int
    end: int


@dataclass
class Resolution:
    """The column the prompt names, or why it names none clearly."""

    column: str | None = None
    candidates: list[str] = field(default_factory=list)
    problem: str | None = None  # "ambiguous" or "unsure"
    said: str = ""
    cued: bool = False
    guessed: bool = False  # not named clearly, but the one column it can mean

    def guess_note(self) -> str:
        return (
            f"target guessed: {self.said!r} is not a column name; it was read as "
            f"{self.column!r}, the one column it can mean (pass --target COL for another)"
        )

    def error(self) -> PlanError:
        names = " or ".join(repr(c) for c in self.candidates)
        hint = "name the column exactly or pass --target COL"
        if self.problem == "ambiguous":
            return PlanError(f"{self.said!r} could mean {names}", hint=hint)
        return PlanError(f"no column is named clearly: {self.said!r} may mean {names}", hint=hint)


def _words(name: str) -> list[str]:
    return forms.split_name(name)


def _variants(name: str) -> set[str]:
    words = _words(name)
    if not words:
        return set()
    found = {name.lower(), " ".join(words), "_".join(words), "".join(words), "-".join(words)}
    last = words[-1]
    for plural in (last + "s", last + "es", last[:-1] + "ies" if last.endswith("y") else None):
        if plural and len(last) > 2:
            found.add(" ".join([*words[:-1], plural]))
    if last.endswith("s") and len(last) > 3:
        found.add(" ".join([*words[:-1], last[:-1]]))
    # Chinese yes/no columns are named 是否X; people say X ("预测复发" for 是否复发)
    for prefix in ("是否", "是不是", "有无", "有没有"):
        if name.startswith(prefix) and len(name) > len(prefix) + 1:
            found.add(name[len(prefix) :])
    return {f for f in found if f}


def _has_cjk(text: str) -> bool:
    return bool(re.search(r"[\u4e00-\u9fff]", text))


#: a one-letter column ("y", "a") is named only after these words, or in quotes: "train a
#: model" does not name a column "a"
_LETTER_CUE = re.compile(r"(predict(s|ing)?|target( column| variable)?( is|=|:)?|for)\s*$")


def _letter_named(text: str, start: int) -> bool:
    before, after = text[:start], text[start + 1 : start + 2]
    quoted = before[-1:] in "\"'`" and before[-1:] != "" and after == before[-1:]
    return quoted or bool(_LETTER_CUE.search(before.rstrip("\"'` ")))


def tokens(text: str) -> list[Token]:
    """The prompt's ASCII words with their stems."""
    return [
        Token(m.group(0), forms.stem(m.group(0)), m.start(), m.end())
        for m in re.finditer(r"[a-z][a-z0-9]*", text)
    ]


def find_mentions(text: str, profile: DataProfile) -> list[Mention]:
    """Every place the (normalised) prompt mentions a column, scored; for each column the
    most literal way it is named (an exact name hides its word forms, and so on)."""
    mentions: list[Mention] = []
    words = tokens(text)
    for column in profile.columns:
        if len(column.name) == 1 and column.name.isascii():
            pattern = rf"(?<![a-z0-9]){re.escape(column.name.lower())}(?![a-z0-9])"
            mentions.extend(
                Mention(column.name, m.start(), 3.01, end=m.end())
                for m in re.finditer(pattern, text)
                if _letter_named(text, m.start())
            )
            continue
        for finder in (_exact, _forms, _concept, _synonym, _typo, _partial):
            found = finder(column.name, text, words)
            if found:
                mentions.extend(found)
                break
    return mentions


def _exact(name: str, text: str, words: list[Token]) -> list[Mention]:
    for form in sorted(_variants(name), key=len, reverse=True):
        if _has_cjk(form):
            pattern = re.escape(form)
        else:
            pattern = rf"(?<![a-z0-9]){re.escape(form)}(?![a-z0-9])"
        found = [
            Mention(name, m.start(), 3.0 + len(form) / 100, end=m.end())
            for m in re.finditer(pattern, text)
        ]
        if found:
            return found
    return []


def _usable_token(token: Token) -> bool:
    return token.stem not in _NOISE_STEMS and token.word not in forms.JOINERS


_NOISE_STEMS = frozenset(forms.stem(w) for w in forms.PROMPT_NOISE)


def _sequence(stems: list[str], words: list[Token]) -> list[tuple[int, int]]:
    """Where ``stems`` occur as consecutive prompt words: (start, end) spans."""
    n = len(stems)
    spans = []
    for i in range(len(words) - n + 1):
        window = words[i : i + n]
        if [t.stem for t in window] == stems and (n > 1 or _usable_token(window[0])):
            spans.append((window[0].start, window[-1].end))
    return spans


def _forms(name: str, text: str, words: list[Token]) -> list[Mention]:
    """Word forms: stems of the whole name, of its subject (is_default → default), the
    subject's words in any order nearby, a related form, or the name's initials."""
    raw = _words(name)
    if _has_cjk(name) or not raw:
        return []
    variants = (tuple(raw), tuple(forms.expand(raw)), tuple(forms.abbreviate(raw)))
    for variant in dict.fromkeys(variants):
        full = [forms.stem(w) for w in variant]
        subject = [forms.stem(w) for w in forms.core(list(variant))]
        for stems, how in ((full, "form"), (subject, "core")):
            spans = _sequence(stems, words)
            if spans:
                return [Mention(name, s, SCORES[how], end=e, how=how) for s, e in spans]
        found = _bag(name, [forms.stem(w) for w in forms.content(list(variant))], words)
        if found:
            return found
    initials = _initials(name, raw, words)
    return initials


def _bag(name: str, stems: list[str], words: list[Token]) -> list[Mention]:
    """All the subject's words close together in any order ("ad clicks" for clicked_on_ad),
    or, for a one-word subject, a related form ("readmission" for readmitted)."""
    if len(stems) == 1:
        related = [
            Mention(name, t.start, SCORES["related"], end=t.end, how="related")
            for t in words
            if _usable_token(t) and len(t.stem) >= 5 and forms.related(t.stem, stems[0])
        ]
        # the subject alone of a longer name: "price" for price_per_sqft (a unit dropped)
        return related or [
            Mention(name, t.start, SCORES["subject"], end=t.end, how="subject")
            for t in words
            if _usable_token(t) and t.stem == stems[0] and len(_words(name)) > 1
        ]
    width = len(stems) + 3
    for i in range(len(words)):
        window = words[i : i + width]
        positions = [next((t for t in window if t.stem == s), None) for s in stems]
        if all(positions) and positions[0] is not None and window[0].stem in stems:
            start = min(t.start for t in positions if t)
            end = max(t.end for t in positions if t)
            return [Mention(name, start, SCORES["bag"], end=end, how="bag")]
    return []


def _initials(name: str, raw: list[str], words: list[Token]) -> list[Mention]:
    """A short one-word name spelled by the prompt's initials ("miles per gallon" → mpg)."""
    if len(raw) != 1 or not (2 <= len(raw[0]) <= 5) or not raw[0].isalpha():
        return []
    n = len(raw[0])
    for i in range(len(words) - n + 1):
        window = words[i : i + n]
        if "".join(t.word[0] for t in window) == raw[0] and all(len(t.word) > 1 for t in window):
            return [
                Mention(
                    name, window[0].start, SCORES["initials"], end=window[-1].end, how="initials"
                )
            ]
    return []


def _concept(name: str, text: str, words: list[Token]) -> list[Mention]:
    """Chinese words for an English name: 销售额 → sales, 明天 + 下雨 → RainTomorrow."""
    present = [(c, text.index(c)) for c in forms.CONCEPTS if c in text]
    if not present or _has_cjk(name):
        return []
    lowered = name.lower().replace(" ", "_")
    subject = [forms.stem(w) for w in forms.content(forms.expand(_words(name)))]
    covered: set[str] = set()
    whole, rank, starts = False, 9, []
    for concept, start in present:
        english = forms.CONCEPTS[concept]
        hit = set(subject) & {forms.stem(p) for w in english for p in w.split("_")}
        if lowered in english:
            whole, rank = True, min(rank, english.index(lowered))
        elif hit:
            rank = min(rank, *(i for i, w in enumerate(english) if forms.stem(w) in hit), 9)
        else:
            continue
        covered |= hit
        starts.append(start)
    if not starts:
        return []
    start = min(starts)
    if whole or set(subject) <= covered:
        score = 2.2 if rank == 0 else 2.0 - min(rank, 5) * 0.02
        return [Mention(name, start, score + 0.01 * len(covered), end=start + 1, how="concept")]
    if subject[-1] in covered:
        return [
            Mention(name, start, SCORES["concept-partial"], end=start + 1, how="concept-partial")
        ]
    return []


def _synonym(name: str, text: str, words: list[Token]) -> list[Mention]:
    """Another English word for the subject ("turnover" for Attrition, "leave" for
    left_company): its only word, or the first or last of two."""
    subject = forms.content(forms.expand(_words(name)))
    if not 1 <= len(subject) <= 2 or _has_cjk(name):
        return []
    groups = {forms.synonym_group(forms.stem(w)) for w in subject} - {None}
    return [
        Mention(name, t.start, SCORES["synonym"], end=t.end, how="synonym")
        for t in words
        if _usable_token(t)
        and t.stem not in {forms.stem(w) for w in subject}
        and forms.synonym_group(t.stem) in groups
    ]


def _typo(name: str, text: str, words: list[Token]) -> list[Mention]:
    """The name (or its subject) with a one- or two-letter typo ("chrun", "rain tomorow")."""
    raw = _words(name)
    for variant in dict.fromkeys((tuple(raw), tuple(forms.core(raw)))):
        start = _typo_at(list(variant), words)
        if start is not None:
            return [Mention(name, start, SCORES["typo"], end=start + 1, how="typo")]
    return []


def _typo_at(name_words: list[str], words: list[Token]) -> int | None:
    joined = " ".join(name_words)
    if _has_cjk(joined) or len(joined.replace(" ", "")) < 4:
        return None
    n = len(name_words)
    for i in range(len(words) - n + 1):
        candidate = " ".join(t.word for t in words[i : i + n])
        if candidate[0] != joined[0]:
            continue
        limit = min(
            allowed_typos(candidate.replace(" ", "")), allowed_typos(joined.replace(" ", ""))
        )
        if candidate != joined and 0 < damerau(candidate, joined, 2) <= limit:
            return words[i].start
    return None


def _partial(name: str, text: str, words: list[Token]) -> list[Mention]:
    """One word of a longer name: its last word (the head, "price" for SalePrice) or another."""
    subject = [forms.stem(w) for w in forms.content(forms.expand(_words(name)))]
    if len(subject) < 2 or _has_cjk(name):
        return []
    found = []
    for t in words:
        if not _usable_token(t) or len(t.word) < 3:
            continue
        if t.stem == subject[-1]:
            how = "partial" if t.stem in _GENERIC_STEMS else "partial-head"
            found.append(Mention(name, t.start, SCORES[how], end=t.end, how=how))
        elif t.stem in subject:
            found.append(Mention(name, t.start, SCORES["partial"], end=t.end, how="partial"))
    return found


_GENERIC_STEMS = frozenset(forms.stem(w) for w in forms.GENERIC_HEADS)


def _usable(column: ColumnProfile) -> bool:
    return column.kind not in ("identifier", "constant", "empty", "text")


_NOT_TARGET_BEFORE = re.compile(
    r"(encod\w*|one[- ]hot|drop|exclud\w*|ignor\w*|without|remove|编码|删除|去掉)\s*(the )?$"
)


def _score_cues(text: str, mentions: list[Mention]) -> None:
    for mention in mentions:
        before = text[max(0, mention.start - 60) : mention.start]
        after = text[mention.end : mention.end + 30]
        strong = STRONG_CUE.search(before) or AFTER_CUE.match(after)
        mention.cue = 2 if strong else 1 if WEAK_CUE.search(before) else 0
        if mention.cued:
            mention.score += 2.0
        # columns named as features to transform are not the target
        if _NOT_TARGET_BEFORE.search(before):
            mention.score -= 3.0
            mention.cue = 0


def _drop_hidden(mentions: list[Mention]) -> list[Mention]:
    """A mention inside a longer one of another column is that column's word, not its own
    ("sales" inside "sales amount")."""
    return [
        m
        for m in mentions
        if not any(
            o.column != m.column
            and o.start <= m.start
            and m.end <= o.end
            and (o.end - o.start) > (m.end - m.start)
            for o in mentions
        )
    ]


def _clear(mention: Mention) -> bool:
    """Whether a mention names its column rather than guesses it."""
    return mention.level == 0 or (mention.level == 1 and mention.cued)


def _rank(mention: Mention) -> tuple[int, int, float, int]:
    # what follows "predict" is the target even when it is named less literally than a
    # column mentioned elsewhere; among equal cues a real name beats a guess
    return (-mention.cue, mention.level, -mention.score, -mention.start)


def resolve_target(text: str, profile: DataProfile) -> Resolution:
    """The column the prompt asks to predict, or why none is named clearly.

    A column the prompt names right after a cue ("predict customer_id") is returned even
    when it cannot be a target, so that validation says why; it is never swapped for
    another column. Unusable columns the prompt merely mentions are not candidates.
    """
    mentions = _drop_hidden(find_mentions(text, profile))
    _score_cues(text, mentions)
    best: dict[str, Mention] = {}
    for mention in mentions:
        usable = _usable(profile.column(mention.column))  # type: ignore[arg-type]
        if not (usable or mention.cued):
            continue
        mention.score -= 0 if usable else 1.0  # a usable cued column wins a tie
        if mention.column not in best or _rank(mention) < _rank(best[mention.column]):
            best[mention.column] = mention
    if not best:
        return Resolution()
    ranked = sorted(best.values(), key=_rank)
    top = ranked[0]
    said = text[top.start : top.end]
    tied = [
        m.column
        for m in ranked
        if _rank(m)[:2] == _rank(top)[:2] and m.score > top.score - TIE_MARGIN
    ]
    if len(tied) > 1:
        log.debug("target mentions tie: %s", ranked)
        return Resolution(candidates=tied, problem="ambiguous", said=said, cued=top.cued)
    if not _clear(top):
        if _stands_out(top, ranked[1:]):
            return Resolution(column=top.column, said=said, cued=top.cued, guessed=True)
        return Resolution(
            candidates=[m.column for m in ranked[:5]], problem="unsure", said=said, cued=top.cued
        )
    # another word for the column ("heavy" for body_mass_g) is a reading, said as such
    guessed = top.how in _NEEDS_CUE
    return Resolution(column=top.column, said=said, cued=top.cued, guessed=guessed)


def _stands_out(top: Mention, rest: list[Mention]) -> bool:
    """A guess is used when no other column is a plausible reading: the others score at
    least ``STANDOUT_MARGIN`` lower. A bare partial word with no cue ("the sales data")
    is too weak to stand on its own."""
    if top.level == 2 and not top.cued:
        return False
    return all(m.score <= top.score - STANDOUT_MARGIN for m in rest)


#: column names that say the column is what to predict
_LABEL_NAME = re.compile(
    r"^(target|label|labels|y|class|outcome|response|ground[_ ]?truth|标签|目标|类别)$",
    re.IGNORECASE,
)


def label_column(profile: DataProfile) -> str | None:
    """The one usable column whose name says it is the label (``target``, ``y``, ``class``…),
    the obvious target of a request that names none; None when there is none or several."""
    found = [c.name for c in profile.columns if _LABEL_NAME.match(c.name.strip()) and _usable(c)]
    return found[0] if len(found) == 1 else None
