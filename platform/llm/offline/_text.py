"""Text normalisation for the offline planner: case, width, British spellings, Chinese numerals, typos."""

from __future__ import annotations

import re
import unicodedata

BRITISH = {
    "optimise": "optimize",
    "optimised": "optimized",
    "optimising": "optimizing",
    "optimisation": "optimization",
    "minimise": "minimize",
    "minimising": "minimizing",
    "maximise": "maximize",
    "maximising": "maximizing",
    "neighbour": "neighbor",
    "neighbours": "neighbors",
    "modelling": "modeling",
    "modelled": "modeled",
    "analyse": "analyze",
    "analysing": "analyzing",
    "summarise": "summarize",
    "summarising": "summarizing",
    "visualise": "visualize",
    "normalise": "normalize",
    "standardise": "standardize",
    "categorise": "categorize",
    "characterise": "characterize",
    "prioritise": "prioritize",
    "utilise": "utilize",
    "organise": "organize",
    "recognise": "recognize",
    "behaviour": "behavior",
    "colour": "color",
    "favour": "favor",
    "centre": "center",
    "programme": "program",
    "catalogue": "catalog",
    "licence": "license",
    "randomise": "randomize",
    "regularisation": "regularization",
    "generalise": "generalize",
    "initialise": "initialize",
}

# Domain words a one- or two-letter typo should still reach.
VOCABULARY = (
    "random",
    "forest",
    "xgboost",
    "lightgbm",
    "catboost",
    "logistic",
    "regression",
    "regressor",
    "classifier",
    "classification",
    "neighbors",
    "support",
    "vector",
    "machine",
    "gradient",
    "boosting",
    "boosted",
    "histogram",
    "optimize",
    "hyperparameters",
    "hyperparameter",
    "tuning",
    "importance",
    "engineering",
    "validation",
    "permutation",
    "stopping",
    "automl",
)
# Common words that sit close to domain words but mean something else.
NOT_TYPOS = frozenset(
    {
        "forecast",
        "forecasting",
        "forecasts",
        "for",
        "fores",
        "forest",
        "foremost",
        "format",
        "formats",
        "feathers",
        "regions",
        "region",
        "register",
        "predictor",
        "predictors",
        "protect",
        "product",
        "products",
        "vectors",
        "machines",
        "supports",
        "stopped",
        "stops",
        "study",
        "studies",
        "trial",
        "trains",
        "training",
        "trained",
        "tuned",
        "tunes",
        "random",
        "ratio",
        "ration",
        "result",
        "results",
        "missing",
        "recall",
        "recalls",
        "features",
        "feature",
        "nearest",
        "linear",
        "linen",
        "liner",
        "border",
        "order",
        "orders",
        "income",
        "outcome",
        "outcomes",
        "boston",
        "boost",
        "boosts",
        "rating",
        "ratings",
        "precise",
        "process",
        "classic",
        "mortality",
        "regress",
        "progress",
        "digress",
        "express",
        "compete",
        "complete",
        "compute",
        "describes",
        "described",
        "ridges",
        "bridge",
        "riders",
        "rider",
        "stable",
        "table",
        "tables",
        "cleaned",
        "evaluated",
        "importance",
        "important",
        "impute",
        "imputed",
        "impurity",
        "purity",
        "engine",
        "engines",
        "charges",
        "iteration",
        "iterations",
        "interaction",
        "interactions",
        "production",
        "prediction",
        "predictions",
        "regressions",
        "optimal",
        "optima",
        "optimum",
        "options",
        "option",
        "stepping",
        "shopping",
        "topping",
        "dropping",
        "gradients",
        "boating",
        "posting",
        "hosting",
        "costing",
        "tuning",
        "running",
        "turning",
        "burning",
        "testing",
        "validating",
        "validated",
        "engineer",
        "engineered",
        "regressed",
        "supported",
        "classified",
        "classifies",
        "classifiers",
        "tandem",
    }
)
_CN_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_CN_UNITS = {"十": 10, "百": 100, "千": 1000, "万": 10000}
_CN_NUMBER = re.compile(r"[零〇一二两三四五六七八九十百千万]+")


def chinese_to_int(text: str) -> int | None:
    total, section, number = 0, 0, 0
    seen = False
    for ch in text:
        if ch in _CN_DIGITS:
            number = _CN_DIGITS[ch]
            seen = True
        elif ch in _CN_UNITS:
            unit = _CN_UNITS[ch]
            if unit == 10000:
                total += (section + number) * unit
                section = 0
            else:
                section += (number or 1) * unit
            number = 0
            seen = True
        else:
            return None
    return total + section + number if seen else None


def _replace_chinese_numbers(text: str) -> str:
    def repl(match: re.Match[str]) -> str:
        value = chinese_to_int(match.group(0))
        # keep words such as 一个 / 一下 intact: only convert numbers next to a counter or unit
        after = text[match.end() : match.end() + 2]
        if value is None or (value < 2 and not re.match(r"[次轮个折分秒小名]", after)):
            return match.group(0)
        return f" {value} "

    return _CN_NUMBER.sub(repl, text)


_EN_UNITS = {
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
}
_EN_TENS = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
_EN_NUMBER = re.compile(
    r"\b(?:(a|one|two|three|four|five|six|seven|eight|nine|ten)[ -]hundred(?:[ -](?:and[ -])?)?)?"
    r"(?:(twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:[ -](one|two|three|four|five|six|seven|eight|nine))?"
    r"|(two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen))?\b"
)
_ONES = {"one": 1, **{k: v for k, v in _EN_UNITS.items() if v < 10}}


def _replace_english_numbers(text: str) -> str:
    """ "thirty" → 30, "a hundred" → 100, "forty five" → 45 ("one" alone stays a word)."""

    def repl(match: re.Match[str]) -> str:
        hundreds, tens, tens_unit, unit = match.groups()
        if not (hundreds or tens or unit):
            return match.group(0)
        value = (1 if hundreds in ("a", "one") else _ONES.get(hundreds or "", 0)) * 100
        value += (
            _EN_TENS.get(tens or "", 0)
            + _ONES.get(tens_unit or "", 0)
            + _EN_UNITS.get(unit or "", 0)
        )
        trailing = " " if match.group(0).endswith((" ", "-")) else ""
        return f"{value}{trailing}"

    return _EN_NUMBER.sub(repl, text)


#: counts said with words ("a dozen trials", "a couple of hours")
_WORD_COUNT_VALUES = {"half a dozen": "6", "a dozen": "12", "dozen": "12", "a couple of": "2"}
_WORD_COUNTS = re.compile(r"\b(half a dozen|a dozen|dozen|a couple of)\b")


def normalize(prompt: str) -> str:
    """Lower-case ASCII-width text with American spellings and Arabic numerals."""
    text = unicodedata.normalize("NFKC", prompt).lower()
    text = text.replace("²", "2").replace("’", "'").replace("“", '"').replace("”", '"')
    text = re.sub(r"\bw/o\b", "without", text)
    text = re.sub(r"\bw/(?=\s)", "with", text)
    text = _replace_chinese_numbers(text)
    text = _replace_english_numbers(text)
    # "3 dozen", "three dozen" (now "3 dozen"): a multiple, before a lone "dozen" reads 12
    text = re.sub(r"\b(\d{1,4}) dozen\b", lambda m: str(int(m.group(1)) * 12), text)
    text = _WORD_COUNTS.sub(lambda m: _WORD_COUNT_VALUES[m.group(1)], text)
    text = re.sub(r"[a-z]+", lambda m: BRITISH.get(m.group(0), m.group(0)), text)
    return re.sub(r"[ \t]+", " ", text).strip()


def damerau(a: str, b: str, limit: int = 3) -> int:
    """Optimal-string-alignment distance (adjacent swaps count once), cut off above ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def allowed_typos(word: str) -> int:
    return 0 if len(word) < 4 else 1 if len(word) <= 6 else 2


def correct_typos(text: str, protected: set[str]) -> str:
    """Replace words within one or two edits of a domain word (never column names or common words)."""

    def fix(match: re.Match[str]) -> str:
        word = match.group(0)
        if word in VOCABULARY or word in NOT_TYPOS or word in protected or len(word) < 4:
            return word
        best, best_distance = None, 99
        for candidate in VOCABULARY:
            distance = damerau(word, candidate, 2)
            if distance < best_distance:
                best, best_distance = candidate, distance
        if (
            best is not None
            and 0 < best_distance <= min(allowed_typos(word), allowed_typos(best))
            and word[0] == best[0]
        ):
            return best
        return word

    return re.sub(r"[a-z]+", fix, text)
