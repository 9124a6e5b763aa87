"""Word forms for matching column names to prompts: a light stemmer, abbreviations,
flag prefixes, English synonyms and Chinese words for English column words.

No dictionary ships with mlpilot, so the stemmer is a small rule set: it only has to map
forms of one word to the same key ("defaulted", "defaults" → "default"; "survival",
"survived", "survivors" → "surviv"), applied identically to prompt and column words.
"""

from __future__ import annotations

import re
from functools import lru_cache

#: forms no suffix rule reaches
IRREGULAR = {
    "left": "leave",
    "leaving": "leave",
    "leaves": "leave",
    "sold": "sell",
    "bought": "buy",
    "paid": "pay",
    "won": "win",
    "lost": "lose",
    "died": "die",
    "dead": "die",
    "death": "die",
    "deaths": "die",
    "children": "child",
    "people": "person",
    "fraudulent": "fraud",
    "fraudster": "fraud",
    "fraudsters": "fraud",
}
# (suffix, shortest stem it may leave), longest suffixes first within a family
_SUFFIXES = (
    ("ational", 3),
    ("ation", 4),
    ("ition", 4),
    ("ement", 3),
    ("ment", 3),
    ("ness", 3),
    ("ions", 3),
    ("ion", 3),
    ("ings", 3),
    ("ing", 3),
    ("edly", 3),
    ("ed", 3),
    ("ers", 4),
    ("er", 4),
    ("ors", 4),
    ("or", 4),
    ("ally", 4),
    ("al", 4),
    ("ity", 4),
    ("ly", 4),
    ("ful", 4),
    ("ulent", 4),
)
_DOUBLE = re.compile(r"([bcdfgklmnprtz])\1$")


@lru_cache(maxsize=4096)
def stem(word: str) -> str:
    """A key shared by the forms of one English word (not a linguistic root)."""
    w = word.lower()
    if w in IRREGULAR:
        return stem(IRREGULAR[w])  # the regular form's key: "left" and "leave" meet
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith(("sses", "shes", "ches", "xes", "zes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix, shortest in _SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= shortest:
            w = w[: -len(suffix)]
            if len(w) >= 5 and _DOUBLE.search(w):
                w = w[:-1]  # "stopped" → "stop", "cancelled" → "cancel"
            break
    if w.endswith("e") and len(w) >= 4:
        w = w[:-1]
    if w.endswith("y") and len(w) >= 4:
        w = w[:-1] + "i"
    return w


def related(a: str, b: str) -> bool:
    """Stems of one word family that the suffix rules left apart ("convert"/"convers")."""
    if a == b:
        return True
    shorter = min(len(a), len(b))
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    return common >= 5 and common >= 0.8 * shorter


#: column-name abbreviations → the words people type
ABBREVIATIONS: dict[str, tuple[str, ...]] = {
    "qty": ("quantity",),
    "amt": ("amount",),
    "temp": ("temperature",),
    "num": ("number",),
    "nbr": ("number",),
    "no": ("number",),
    "pct": ("percent",),
    "perc": ("percent",),
    "yr": ("year",),
    "yrs": ("years",),
    "mo": ("month",),
    "mth": ("month",),
    "mnth": ("month",),
    "wk": ("week",),
    "dt": ("date",),
    "rev": ("revenue",),
    "cust": ("customer",),
    "txn": ("transaction",),
    "trx": ("transaction",),
    "prod": ("product",),
    "avg": ("average",),
    "cnt": ("count",),
    "ct": ("count",),
    "dept": ("department",),
    "emp": ("employee",),
    "tot": ("total",),
    "bal": ("balance",),
    "acct": ("account",),
    "prob": ("probability",),
    "px": ("price",),
    "vol": ("volume",),
    "sal": ("salary",),
    "inc": ("income",),
    "occ": ("occupancy",),
    "pop": ("population",),
    "ht": ("height",),
    "wt": ("weight",),
    "dist": ("distance",),
    "dur": ("duration",),
    "freq": ("frequency",),
    "cat": ("category",),
    "val": ("value",),
    "lbl": ("label",),
    "tgt": ("target",),
    "cls": ("class",),
    "diag": ("diagnosis",),
    "chol": ("cholesterol",),
    "hum": ("humidity",),
    "resp": ("response",),
    "conv": ("conversion",),
    "sat": ("satisfaction",),
    "perf": ("performance",),
    "exp": ("experience",),
    "edu": ("education",),
    "loc": ("location",),
    "bp": ("blood", "pressure"),
    "mpg": ("miles", "per", "gallon"),
    "ltv": ("lifetime", "value"),
    "clv": ("customer", "lifetime", "value"),
    "aov": ("average", "order", "value"),
    "ctr": ("click", "through", "rate"),
    "roi": ("return", "on", "investment"),
    "kwh": ("kilowatt", "hours"),
}
#: abbreviations also read in prompts ("predict temp"); the rest are too common as words
PROMPT_ABBREVIATIONS = frozenset(
    {"qty", "amt", "temp", "pct", "yrs", "rev", "cust", "txn", "avg", "cnt", "dept", "bal"}
    | {"prob", "sal", "occ", "freq", "chol", "hum", "bp", "mpg", "ltv", "clv", "aov", "ctr"}
    | {"roi", "kwh", "diag", "conv"}
)
#: words around a yes/no column's subject: is_default, has_churned, churn_flag, did_survive
FLAG_WORDS = frozenset(
    {"is", "has", "have", "was", "were", "did", "does", "will", "had", "flag", "flg", "ind"}
    | {"indicator", "yn", "bool", "binary", "bin", "label", "target", "y"}
)
#: units at the end of a name: load_mw is the load, price_usd the price
UNIT_SUFFIXES = frozenset(
    {"mw", "kw", "kwh", "wh", "usd", "eur", "gbp", "cny", "rmb", "km", "kg", "lb", "lbs", "mph"}
    | {"kmh", "cm", "mm", "ft", "sqft", "pct", "c", "f", "sec", "secs", "ms", "min", "mins"}
    | {"hr", "hrs", "yr", "yrs", "days", "usd", "dollars", "euros", "g", "mg", "ml", "l", "oz"}
)
#: words that join the others in a name and carry no meaning of their own
JOINERS = frozenset({"of", "the", "a", "an", "per", "on", "in", "to", "and", "by", "for", "at"})
#: words nearly every prompt uses: they never name a column by themselves
PROMPT_NOISE = frozenset(
    {"model", "data", "dataset", "train", "predict", "feature", "run", "column", "file"}
    | {"best", "use", "try", "test", "tune", "target", "variable", "it", "this", "that"}
)
#: head words too general to name a column alone ("predict value" for basket_value)
GENERIC_HEADS = frozenset(
    {"value", "amount", "count", "number", "rate", "score", "type", "level", "total", "id"}
    | {"date", "time", "flag", "status", "code", "name", "index", "class", "label", "result"}
    | {"outcome", "target", "size", "percent", "ratio"}
)

#: English words that name the same outcome ("turnover" for an Attrition column)
SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("churn", "attrition", "exited", "exit", "leave", "quit", "turnover", "cancel", "resign"),
    ("default", "delinquent", "delinquency", "nonpayment", "bad_loan", "charged_off"),
    ("fraud", "scam"),
    ("survived", "alive", "survival", "survive", "died", "perished"),
    ("converted", "conversion", "signup", "subscribed"),
    ("purchased", "purchase", "buy", "bought"),
    ("clicked", "click"),
    ("sales", "revenue"),
    ("price", "cost", "charges", "fee", "fare", "expense", "expenses", "premium", "sell", "worth"),
    ("count", "number", "quantity", "units", "volume"),
    ("salary", "wage", "wages", "earnings", "compensation", "pay"),
    ("demand", "load", "consumption", "usage"),
    ("spam", "junk"),
    ("rain", "rainfall", "precipitation"),
    ("weight", "mass", "heavy", "heaviness", "weigh", "weighs"),
    ("height", "tall", "tallness"),
    ("delayed", "late", "delay"),
    ("readmitted", "readmission"),
    ("diagnosis", "disease", "diagnosed"),
    ("approved", "approval", "accepted"),
)

# Chinese words for common targets → English column words they may stand for, the usual
# one first.
CONCEPTS: dict[str, tuple[str, ...]] = {
    "流失": ("churn", "churned", "attrition", "exited", "left", "cancelled"),
    "离职": ("attrition", "left", "quit", "turnover", "churn"),
    "违约": ("default", "defaulted", "delinquent", "bad_loan", "loan_status"),
    "逾期": ("delinquent", "overdue", "default", "late"),
    "房价": ("price", "saleprice", "sale_price", "house_price", "median_house_value", "value"),
    "售价": ("price", "selling_price", "saleprice", "sale_price"),
    "价格": ("price", "saleprice", "sale_price", "cost"),
    "票价": ("fare", "price"),
    "租金": ("rent", "price"),
    "销售额": ("sales", "revenue", "sales_amount"),
    "销量": ("sales", "units_sold", "quantity", "units", "volume"),
    "销售": ("sales", "revenue"),
    "营收": ("revenue", "sales"),
    "收入": ("income", "revenue", "salary"),
    "工资": ("salary", "wage", "wages", "income", "pay"),
    "薪资": ("salary", "wage", "income", "pay"),
    "薪水": ("salary", "wage", "income", "pay"),
    "利润": ("profit",),
    "成本": ("cost",),
    "费用": ("charges", "cost", "expenses", "fee"),
    "保费": ("premium", "charges"),
    "存活": ("survived", "survival"),
    "生还": ("survived", "survival"),
    "幸存": ("survived", "survival"),
    "欺诈": ("fraud", "is_fraud", "fraudulent"),
    "垃圾邮件": ("spam",),
    "转化": ("converted", "conversion", "purchased"),
    "购买": ("purchased", "purchase", "bought"),
    "点击": ("clicked", "click", "ctr"),
    "广告": ("ad", "ads", "advert"),
    "糖尿病": ("diabetes", "outcome", "diabetic"),
    "心脏病": ("heart_disease", "target", "disease"),
    "疾病": ("disease", "diagnosis", "outcome"),
    "诊断": ("diagnosis", "outcome"),
    "再入院": ("readmitted", "readmission"),
    "负荷": ("load", "demand", "consumption"),
    "用电量": ("consumption", "load", "demand", "usage", "kwh"),
    "能耗": ("consumption", "energy", "load", "kwh"),
    "需求": ("demand",),
    "客流量": ("customers", "visitors", "footfall", "traffic"),
    "客流": ("customers", "visitors", "footfall", "traffic"),
    "访客": ("visitors",),
    "数量": ("count", "quantity", "cnt", "number"),
    "租借": ("rentals", "rented", "count"),
    "评分": ("rating", "score"),
    "分数": ("score", "grade"),
    "成绩": ("grade", "score"),
    "满意度": ("satisfaction",),
    "品种": ("species", "variety"),
    "种类": ("species", "type", "kind", "category", "variety"),
    "物种": ("species",),
    "类型": ("type", "category", "kind"),
    "性别": ("sex", "gender"),
    "价钱": ("price", "cost"),
    "房租": ("rent", "price"),
    "人数": ("count", "visitors", "customers"),
    "销售量": ("sales", "units_sold", "quantity"),
    "离开": ("left", "exited", "churn", "attrition"),
    "退订": ("churn", "churned", "cancelled", "unsubscribed"),
    "结果": ("outcome", "result", "target", "label"),
    "等级": ("grade", "class", "level", "rating"),
    "评级": ("rating", "grade"),
    "风险": ("risk",),
    "得分": ("score",),
    "身体质量指数": ("bmi",),
    "血糖": ("glucose",),
    "车价": ("price", "selling_price"),
    "油耗": ("mpg", "fuel_consumption"),
    "类别": ("class", "category", "label"),
    "标签": ("label", "target", "class"),
    "质量": ("quality",),
    "年龄": ("age",),
    "温度": ("temperature", "temp"),
    "湿度": ("humidity",),
    "下雨": ("rain", "rainfall"),
    "降雨": ("rain", "rainfall", "precipitation"),
    "降水": ("precipitation", "rain", "rainfall"),
    "明天": ("tomorrow",),
    "今天": ("today",),
    "每周": ("weekly", "week"),
    "每月": ("monthly", "month"),
    "每日": ("daily", "day"),
    "延误": ("delayed", "delay"),
    "取消": ("cancelled", "canceled", "cancel"),
    "故障": ("failure", "fault", "failed"),
    "寿命": ("lifespan", "life", "rul"),
    "体重": ("weight",),
    "身高": ("height",),
    "血压": ("blood_pressure", "bp"),
    "产量": ("yield", "output", "production"),
    "时长": ("duration",),
    "里程": ("mileage", "km_driven"),
}


def split_name(name: str) -> list[str]:
    """A column name's words, lower case: snake_case, kebab-case, camelCase, HTTPStatus."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", spaced)
    return [w for w in re.split(r"[\s_\-./]+", spaced.lower()) if w]


def expand(words: list[str], table: frozenset[str] | None = None) -> list[str]:
    """Words with abbreviations written out (all of them, or only those in ``table``)."""
    out: list[str] = []
    for word in words:
        if word in ABBREVIATIONS and (table is None or word in table):
            out.extend(ABBREVIATIONS[word])
        else:
            out.append(word)
    return out


def abbreviate(words: list[str]) -> list[str]:
    """Words with the abbreviations people type put back ("temperature" → "temp")."""
    out: list[str] = []
    i = 0
    while i < len(words):
        for short in sorted(PROMPT_ABBREVIATIONS):
            long = ABBREVIATIONS[short]
            if tuple(words[i : i + len(long)]) == long:
                out.append(short)
                i += len(long)
                break
        else:
            out.append(words[i])
            i += 1
    return out


def core(words: list[str]) -> list[str]:
    """The words naming a column's subject: flag words at either end, units at the end,
    dropped."""
    start, end = 0, len(words)
    while start < end - 1 and words[start] in FLAG_WORDS:
        start += 1
    while end - 1 > start and (words[end - 1] in FLAG_WORDS or words[end - 1] in UNIT_SUFFIXES):
        end -= 1
    return words[start:end]


def content(words: list[str]) -> list[str]:
    return [w for w in core(words) if w not in JOINERS] or core(words)


@lru_cache(maxsize=1)
def _synonym_index() -> dict[str, int]:
    index: dict[str, int] = {}
    for i, group in enumerate(SYNONYM_GROUPS):
        for word in group:
            if "_" not in word:  # "bad_loan" must not make every "loan" a default
                index.setdefault(stem(word), i)
    return index


def synonym_group(word_stem: str) -> int | None:
    return _synonym_index().get(word_stem)
