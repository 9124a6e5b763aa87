"""Numbers with their meaning: trials, folds, top-k, run limits and time budgets."""

from __future__ import annotations

import re

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
