"""Numbers with their meaning: trials, folds, top-k, run limits and time budgets."""

from __future__ import annotations

import re

from mlpilot.platform.llm.offline._text import damerau

_W = r"(?<![a-z0-9_])"
_N = r"(\d+(?:\.\d+)?)"

TRIALS = [
    re.compile(
        rf"{_N}\s*(?:optuna |hpo |tuning |search |optimization )?(?:trials?|iterations?|evals?|evaluations?|tries|attempts|configs?|configurations?|candidates?|samples? of hyper\w*){'(?![a-z])'}"
    ),
    re.compile(rf"(?:trials?|iterations?|n_trials)\s*(?:=|:|of|to)?\s*{_N}(?![\d.])"),
    re.compile(rf"{_N}\s*(?:次试验|次迭代|次搜索|组参数|个试验|次|轮|组)"),
    re.compile(rf"(?:试验|迭代|搜索|调参|尝试)\s*{_N}"),
    re.compile(rf"{_N}\s*rounds?(?![a-z])"),
]
FOLDS = [
    re.compile(rf"{_N}\s*[- ]?folds?(?![a-z])"),
    re.compile(rf"(?:cv|folds?|k)\s*(?:=|:|of)\s*{_N}"),
    re.compile(rf"{_N}\s*[- ]?(?:way|times) cross"),
    re.compile(rf"{_N}\s*折"),
]
TOP_K = [
    re.compile(rf"{_W}top[ -]?{_N}"),
    re.compile(rf"{_N}\s*(?:most|top) (?:important|influential|relevant)"),
    re.compile(rf"{_W}(?:best|first|leading) {_N} (?:features|variables|columns|drivers|factors)"),
    re.compile(rf"前\s*{_N}"),
    re.compile(rf"{_N}\s*(?:个)?(?:最重要|关键|重要)的?(?:特征|因素|变量)"),
]
RUN_LIMIT = [
    re.compile(rf"{_W}(?:last|latest|recent|previous|past|first|top)\s+{_N}\s+(?:\S+ )?runs"),
    re.compile(rf"{_N}\s+(?:most )?(?:recent|latest|last)\s+(?:\S+ )?runs"),
    re.compile(rf"{_W}{_N}\s+runs"),
    re.compile(rf"(?:最近|最新|前)的?\s*{_N}\s*(?:次|个|条)?"),
    re.compile(rf"{_W}(?:last|latest|recent|previous|past|first|top)\s+{_N}" r"(?![.\d])"),
]
_UNITS = {
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
    "秒": 1,
    "秒钟": 1,
    "m": 60,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "分钟": 60,
    "分": 60,
    "h": 3600,
    "hr": 3600,
    "hrs": 3600,
    "hour": 3600,
    "hours": 3600,
    "小时": 3600,
    "个小时": 3600,
    "钟头": 3600,
}
DURATION = re.compile(
    rf"{_N}\s*[- ]?(seconds?|secs?|minutes?|mins?|hours?|hrs?|s|m|h|秒钟|秒|分钟|个小时|小时|钟头)(?![a-z])"
)
WORD_DURATIONS = [
    (re.compile(rf"{_W}half (?:an )?hour|{_W}half-hour|30-minute|半小时|半个小时|半个钟头"), 1800),
    (re.compile(rf"{_W}(?:a |one )?quarter (?:of )?(?:an )?hour|一刻钟"), 900),
    (re.compile(rf"{_W}(?:an|one) hour{'(?![a-z])'}|一小时|一个小时"), 3600),
    (re.compile(rf"{_W}(?:a|one) minute{'(?![a-z])'}"), 60),
    (re.compile(rf"{_W}(?:a )?couple (?:of )?hours"), 7200),
]


#: words that count something right after a number, as typed correctly
UNIT_WORDS = (
    "trials",
    "trial",
    "tries",
    "iterations",
    "iteration",
    "evaluations",
    "attempts",
    "configurations",
    "candidates",
    "rounds",
    "folds",
    "fold",
    "minutes",
    "minute",
    "hours",
    "hour",
    "seconds",
    "second",
    "runs",
    "features",
)
#: real words one typo away from a unit ("500 trees" is not "500 tries")
_NOT_UNITS = frozenset({"trees", "terms", "tiers", "teams", "times", "folks", "forms", "runes"})
_AFTER_NUMBER = re.compile(r"(?<![a-z0-9_])(\d+(?:\.\d+)?\s*[- ]?)([a-z]{4,})(?![a-z])")


def fix_units(text: str) -> str:
    """A misspelt unit right after a number, spelt right: "15 trails" → "15 trials"."""

    def fix(match: re.Match[str]) -> str:
        word = match.group(2)
        if word in UNIT_WORDS or word in _NOT_UNITS:
            return match.group(0)
        best = min(UNIT_WORDS, key=lambda unit: damerau(word, unit, 2))
        allowed = 1 if len(word) <= 6 else 2
        if best[0] == word[0] and damerau(word, best, 2) <= allowed:
            return match.group(1) + best
        return match.group(0)

    return _AFTER_NUMBER.sub(fix, text)


def _as_int(text: str) -> int | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if value.is_integer() else None


def first_int(
    patterns: list[re.Pattern[str]], text: str, low: int = 1, high: int = 100000
) -> int | None:
    for pattern in patterns:
        for match in pattern.finditer(text):
            value = _as_int(match.group(1))
            if value is not None and low <= value <= high:
                return value
    return None


def out_of_range(patterns: list[re.Pattern[str]], text: str, low: int, high: int) -> str | None:
    """The phrase of a count outside ``low..high`` ("0 trials"), when none inside it is given."""
    if first_int(patterns, text, low, high) is not None:
        return None
    for pattern in patterns:
        for match in pattern.finditer(text):
            value = _as_int(match.group(1))
            if value is None or not low <= value <= high:
                return match.group(0).strip()
    return None


#: counts given as words the planner cannot turn into a number ("a bunch of trials")
VAGUE_COUNT = re.compile(
    rf"{_W}((?:a (?:bunch|lot|few|couple|handful|number|ton) of|lots of|plenty of|tons of|some|several|many|a few|enough|more|fewer|loads of)"
    r"\s+(?:more\s+)?(?:optuna |tuning |search |hpo )?"
    r"(trials?|iterations?|rounds|folds|tries|attempts|minutes|hours))(?![a-z])"
)
_ANY_NUMBER = re.compile(
    r"(?<![\w./:\-])(\d+(?:\.\d+)?)(?![\w/:]|-\d)(\s*(?:[a-z]+|[\u4e00-\u9fff]{1,2}))?"
)
_RATIO = re.compile(r"(?<![\w/:.])\d+\s*/\s*\d+(?![\w/])(\s*[a-z]+)?")
#: Chinese counters after a number that count things, not a budget ("一个模型", "二手车")
_COUNTERS = re.compile(r"\s*[个种手位下些项名款类只条]")


def unread_numbers(text: str, read: list[re.Pattern[str]]) -> list[str]:
    """Numbers (with the word after them) that none of the ``read`` patterns took."""
    spans = [m.span() for pattern in read for m in pattern.finditer(text)]
    found = [  # "an 80/20 split": the plan has no split to set
        m.group(0).strip()
        for m in _RATIO.finditer(text)
        if not any(s <= m.start() < e for s, e in spans)
    ]
    for match in _ANY_NUMBER.finditer(text):
        if _COUNTERS.match(text, match.end(1)):
            continue
        if not any(s <= match.start(1) and match.end(1) <= e for s, e in spans):
            found.append(match.group(0).strip())
    return found


_AND_A_HALF = re.compile(
    rf"(?:{_N}|an|one|a)\s*(?:hours?|hrs?|h) and a half|{_N}\s*个?半(?:小时|钟头)"
)


def duration_seconds(text: str) -> int | None:
    """A time budget in whole seconds ("10 minutes", "half an hour", "30分钟")."""
    half = _AND_A_HALF.search(text)
    if half:
        hours = half.group(1) or half.group(2)
        return round((float(hours) if hours else 1.0) * 3600 + 1800)
    for match in DURATION.finditer(text):
        value = float(match.group(1))
        unit = _UNITS.get(match.group(2))
        if unit:
            seconds = value * unit
            if seconds >= 1:
                return round(seconds)
    for pattern, seconds in WORD_DURATIONS:
        if pattern.search(text):
            return seconds
    return None


def strip_durations(text: str) -> str:
    """Text without time budgets, so "10 minutes" is never read as 10 trials."""
    text = _AND_A_HALF.sub(" ", text)
    text = DURATION.sub(" ", text)
    for pattern, _ in WORD_DURATIONS:
        text = pattern.sub(" ", text)
    return text
