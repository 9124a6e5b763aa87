"""Finding the target column in a prompt: exact, case, plural, snake_case, Chinese, typos.

A column is chosen only when the prompt mentions it; the planner never guesses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mlpilot.platform.llm.offline._text import allowed_typos, damerau
from mlpilot.platform.ml.profile import ColumnProfile, DataProfile

# Chinese words for common targets → English column words they may stand for.
CONCEPTS: dict[str, tuple[str, ...]] = {
    "流失": ("churn", "churned", "attrition", "exited", "left"),
    "违约": ("default", "defaulted", "delinquent", "bad_loan", "loan_status"),
    "房价": ("price", "saleprice", "sale_price", "house_price", "median_house_value", "value"),
    "价格": ("price", "saleprice", "sale_price", "cost"),
    "售价": ("price", "saleprice", "sale_price"),
    "销售额": ("sales", "revenue", "sales_amount"),
    "销量": ("sales", "units_sold", "quantity", "units"),
    "销售": ("sales", "revenue"),
    "营收": ("revenue", "sales"),
    "收入": ("income", "revenue", "salary"),
    "工资": ("salary", "wage", "wages", "income"),
    "薪资": ("salary", "wage", "income"),
    "存活": ("survived", "survival"),
    "生还": ("survived", "survival"),
    "幸存": ("survived", "survival"),
    "欺诈": ("fraud", "is_fraud", "fraudulent"),
    "转化": ("converted", "conversion", "purchased"),
    "购买": ("purchased", "purchase", "bought"),
    "点击": ("clicked", "click", "ctr"),
    "糖尿病": ("diabetes", "outcome", "diabetic"),
    "心脏病": ("heart_disease", "target", "disease"),
    "疾病": ("disease", "diagnosis", "outcome"),
    "诊断": ("diagnosis", "outcome"),
    "负荷": ("load", "demand", "consumption"),
    "用电量": ("consumption", "load", "demand", "usage"),
    "能耗": ("consumption", "energy", "load"),
    "需求": ("demand",),
    "评分": ("rating", "score"),
    "品种": ("species", "variety"),
    "类别": ("class", "category", "label"),
    "标签": ("label", "target", "class"),
    "质量": ("quality",),
    "年龄": ("age",),
    "温度": ("temperature", "temp"),
    "利润": ("profit",),
    "租金": ("rent",),
}
# Words after which the next column mention is the thing to predict.
CUE = re.compile(
    r"(predict(ing|s|ion|ions)?( of| for| on| whether| if)?|forecast(ing|s)?|target( column| variable| is|=)?|estimat(e|ing)|classify(ing)?|model(ing)?|"
    r"explain(ing)?|driv(ing|ers? of|es)|affect(s|ing)?|influenc(e|es|ing)|determin(e|es|ing)|impact(s|ing)?|for|on|of|regress(ing)?|label(=| is)?|y=|"
    r"预测|影响|目标|决定|解释|关于)\s*(the |a |an |customer |customers' |whether |if |客户|用户|是否)*$"
)


@dataclass
class Mention:
    column: str
    start: int
    score: float
    cued: bool = False


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", name)
    return [w for w in re.split(r"[\s_\-./]+", spaced.lower()) if w]


def _variants(name: str) -> set[str]:
    words = _words(name)
    if not words:
        return set()
    forms = {name.lower(), " ".join(words), "_".join(words), "".join(words), "-".join(words)}
    last = words[-1]
    for plural in (last + "s", last + "es", last[:-1] + "ies" if last.endswith("y") else None):
        if plural and len(last) > 2:
            forms.add(" ".join([*words[:-1], plural]))
    if last.endswith("s") and len(last) > 3:
        forms.add(" ".join([*words[:-1], last[:-1]]))
    # Chinese yes/no columns are named 是否X; people say X ("预测复发" for 是否复发)
    for prefix in ("是否", "是不是", "有无", "有没有"):
        if name.startswith(prefix) and len(name) > len(prefix) + 1:
            forms.add(name[len(prefix) :])
    return {f for f in forms if f}


def _has_cjk(text: str) -> bool:
    return bool(re.search(r"[\u4e00-\u9fff]", text))


#: a one-letter column ("y", "a") is named only after these words, or in quotes: "train a
#: model" does not name a column "a"
_LETTER_CUE = re.compile(r"(predict(s|ing)?|target( column| variable)?( is|=|:)?|for)\s*$")


def _letter_named(text: str, start: int) -> bool:
    before, after = text[:start], text[start + 1 : start + 2]
    quoted = before[-1:] in "\"'`" and before[-1:] != "" and after == before[-1:]
    return quoted or bool(_LETTER_CUE.search(before.rstrip("\"'` ")))


def find_mentions(text: str, profile: DataProfile) -> list[Mention]:
    """Every place the (normalised) prompt mentions a column, scored."""
    mentions: list[Mention] = []
    prompt_words = [(m.group(0), m.start()) for m in re.finditer(r"[a-z][a-z0-9]*", text)]
    for column in profile.columns:
        if len(column.name) == 1 and column.name.isascii():
            pattern = rf"(?<![a-z0-9]){re.escape(column.name.lower())}(?![a-z0-9])"
            mentions.extend(
                Mention(column.name, m.start(), 3.01)
                for m in re.finditer(pattern, text)
                if _letter_named(text, m.start())
            )
            continue
        found = False
        for form in sorted(_variants(column.name), key=len, reverse=True):
            if _has_cjk(form):
                pattern = re.escape(form)
            else:
                pattern = rf"(?<![a-z0-9]){re.escape(form)}(?![a-z0-9])"
            for match in re.finditer(pattern, text):
                mentions.append(Mention(column.name, match.start(), 3.0 + len(form) / 100))
                found = True
            if found:
                break
        if found:
            continue
        for concept, english in CONCEPTS.items():
            if concept in text and _matches_concept(column.name, english):
                mentions.append(Mention(column.name, text.index(concept), 2.0))
                found = True
                break
        if found:
            continue
        typo = _typo_mention(column.name, prompt_words)
        if typo is not None:
            mentions.append(Mention(column.name, typo, 1.0))
    return mentions


def _typo_mention(name: str, prompt_words: list[tuple[str, int]]) -> int | None:
    """Where the prompt names ``name`` with a one- or two-letter typo ("chrun", "rain tomorow")."""
    words = _words(name)
    joined = " ".join(words)
    if _has_cjk(joined) or len(joined.replace(" ", "")) < 4:
        return None
    n = len(words)
    for i in range(len(prompt_words) - n + 1):
        candidate = " ".join(w for w, _ in prompt_words[i : i + n])
        if candidate[0] != joined[0]:
            continue
        limit = min(
            allowed_typos(candidate.replace(" ", "")), allowed_typos(joined.replace(" ", ""))
        )
        if candidate != joined and 0 < damerau(candidate, joined, 2) <= limit:
            return prompt_words[i][1]
    return None


def _matches_concept(name: str, english: tuple[str, ...]) -> bool:
    lowered = name.lower()
    words = set(_words(name))
    return lowered in english or bool(words & set(english))


def _usable(column: ColumnProfile) -> bool:
    return column.kind not in ("identifier", "constant", "empty", "text")


def resolve_target(text: str, profile: DataProfile) -> str | None:
    """The column the prompt asks to predict, or None when it names none.

    A column the prompt names right after a cue ("predict customer_id") is returned even
    when it cannot be a target, so that validation says why; it is never swapped for
    another column. Unusable columns the prompt merely mentions are not candidates.
    """
    mentions = find_mentions(text, profile)
    if not mentions:
        return None
    for mention in mentions:
        before = text[max(0, mention.start - 40) : mention.start]
        mention.cued = bool(CUE.search(before))
        if mention.cued:
            mention.score += 2.0
        # columns named as features to transform are not the target
        if re.search(
            r"(encod\w*|one[- ]hot|drop|exclud\w*|ignor\w*|without|remove|编码|删除|去掉)\s*(the )?$",
            before,
        ):
            mention.score -= 3.0
            mention.cued = False
    candidates = []
    for mention in mentions:
        usable = _usable(profile.column(mention.column))  # type: ignore[arg-type]
        if usable or mention.cued:
            mention.score -= 0 if usable else 1.0  # a usable cued column wins a tie
            candidates.append(mention)
    if not candidates:
        return None
    best = max(candidates, key=lambda m: (m.score, m.start))
    return best.column
