"""What words mean: model families, metrics, intents and negations, in English and Chinese.

Patterns run on normalised text (lower case, American spelling, Arabic numerals).
Longer phrases are listed before shorter ones that they contain. Each model family's
words live in its class (``Family.words``, ``ml/families``); this module orders them.
"""

from __future__ import annotations

import re
from functools import cache

from mlpilot.platform.ml import families

_W = r"(?<![a-z0-9_])"  # word start for ASCII terms (CJK text has no spaces)
_E = r"(?![a-z0-9_])"


def _alt(*terms: str) -> str:
    return "|".join(terms)


def _family_patterns(generic: bool) -> list[tuple[str, str]]:
    """Each plan family's words (or generic words), in the families' ``word_order``."""
    named = sorted(families.registry(), key=lambda f: f.word_order)
    return [
        (f.name, _alt(*(f.generic_words if generic else f.words)))
        for f in named
        if f.plan and (f.generic_words if generic else f.words)
    ]


#: words asking for a search across families (``model="auto"``)
AUTO_PATTERN: tuple[str, str] = (
    "auto",
    _alt(
        rf"{_W}auto ?ml{_E}",
        rf"{_W}all (the )?(model|algorithm)s?{_E}",
        rf"{_W}every (model|algorithm){_E}",
        rf"{_W}(several|multiple|many|different) (model|algorithm)s{_E}",
        rf"{_W}(across|over) (model )?famil(y|ies){_E}",
        rf"{_W}whichever model{_E}",
        rf"{_W}best (model|algorithm) (family|type){_E}",
        "自动机器学习",
        "所有模型",
        "多种模型",
        "各种模型",
    ),
)


#: generic boosting words: the family that is the default for ``families.BOOSTING``
BOOSTING_PATTERN: tuple[str, str] = (
    "boosting",
    _alt(
        rf"{_W}gradient[ -]?boost(ing|ed)?( (machine|model|classifier|regressor))?{_E}",
        rf"{_W}gbdt{_E}",
        rf"{_W}gbm{_E}",
        rf"{_W}boosting{_E}",
        "梯度提升",
        "提升树",
    ),
)


Patterns = list[tuple[str, re.Pattern[str]]]


def model_res() -> tuple[Patterns, Patterns]:
    """The compiled (named, generic) model patterns of the families registered now: the
    built-in ones, and a plugin's once it is loaded."""
    return _model_res(families.names())


@cache
def _model_res(names: tuple[str, ...]) -> tuple[Patterns, Patterns]:
    # ``names`` is the cache key: the registry only grows, so its names say when to rebuild
    named = [*_family_patterns(generic=False), AUTO_PATTERN]
    generic = [*_family_patterns(generic=True), BOOSTING_PATTERN]
    return (
        [(name, re.compile(p)) for name, p in named],
        [(name, re.compile(p)) for name, p in generic],
    )


#: "gradient boosting" with no library named (``families.BOOSTING``: scikit-learn's histogram
#: implementation)
BOOSTING_DEFAULT = families.default(families.BOOSTING).name

METRIC_PATTERNS: list[tuple[str, str]] = [
    (
        "pr_auc",
        _alt(
            rf"{_W}pr[ -]?auc{_E}",
            rf"{_W}auc[ -]?pr{_E}",
            rf"{_W}average precision{_E}",
            rf"{_W}auprc{_E}",
            rf"{_W}precision[ -]recall (auc|curve)",
            "pr曲线下面积",
        ),
    ),
    (
        "roc_auc",
        _alt(
            rf"{_W}roc[ -_]?auc{_E}",
            rf"{_W}auc[ -_]?roc{_E}",
            rf"{_W}auroc{_E}",
            rf"{_W}area under (the )?(roc )?curve{_E}",
            rf"{_W}auc{_E}",
            rf"{_W}roc{_E}",
            "曲线下面积",
        ),
    ),
    ("balanced_accuracy", _alt(rf"{_W}balanced[ -_]?acc(uracy)?{_E}", "平衡准确率")),
    ("accuracy", _alt(rf"{_W}accuracy{_E}", rf"{_W}acc{_E}", "准确率", "正确率", "准确度")),
    (
        "f1",
        _alt(
            rf"{_W}f1([ -_]?score)?{_E}",
            rf"{_W}f[ -]score{_E}",
            rf"{_W}f[ -]measure{_E}",
            "f1值",
            "f1分数",
        ),
    ),
    (
        "log_loss",
        _alt(
            rf"{_W}log[ -_]?loss{_E}",
            rf"{_W}cross[ -]?entropy{_E}",
            rf"{_W}logarithmic loss{_E}",
            "对数损失",
            "交叉熵",
        ),
    ),
    ("precision", _alt(rf"{_W}precision{_E}", "精确率", "查准率", "精准率")),
    (
        "recall",
        _alt(
            rf"{_W}recall{_E}",
            rf"{_W}sensitivity{_E}",
            rf"{_W}true positive rate{_E}",
            "召回率",
            "查全率",
        ),
    ),
    (
        "rmse",
        _alt(
            rf"{_W}rmse{_E}",
            rf"{_W}root[ -]mean[ -]squared?[ -]error{_E}",
            rf"{_W}mse{_E}",
            rf"{_W}mean squared error{_E}",
            "均方根误差",
            "均方误差",
        ),
    ),
    ("mae", _alt(rf"{_W}mae{_E}", rf"{_W}mean absolute error{_E}", "平均绝对误差")),
    (
        "r2",
        _alt(
            rf"{_W}r[ -]?2{_E}",
            rf"{_W}r\^2{_E}",
            rf"{_W}r[ -]squared{_E}",
            rf"{_W}coefficient of determination{_E}",
            "决定系数",
            "拟合优度",
        ),
    ),
]
METRIC_RES = [(name, re.compile(p)) for name, p in METRIC_PATTERNS]


def _re(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


#: words for a result of a run, in questions about the runs
_RESULT_WORDS = (
    r"accuracy|auc|roc[ _-]?auc|pr[ _-]?auc|f1|precision|recall|rmse|mae|r2|r squared|log ?loss"
    r"|score|result|metric|model|run|one"
)
INTENTS: dict[str, re.Pattern[str]] = {
    "tune": _re(
        rf"{_W}(tun(e|es|ed|ing)|optimiz(e|es|ed|ing|ation)|hyper[ -]?param\w*|hpo|sweep|auto ?ml|grid[ -]search|random search|bayesian|search(ing)? (for |over )?(the )?(best )?(hyper|param|config|setting|model)"
        rf"|(chosen|picked|selected|found|set) (by|via|with|through) (a )?search|(by|via) (a )?search{_E})"
        r"|调参|调优|优化|超参|参数搜索|搜索参数|自动机器学习|寻优|通过搜索|搜索确定|搜索来|调.{0,3}参数|调一下"
    ),
    "train": _re(
        rf"{_W}(train\w*|fit(ting|s)?{_E}|build\w*|predict\w*|forecast\w*|modell?ing|classif\w*|regress\w*|learn\w*|baseline|estimat\w*)"
        r"|训练|预测|建模|分类|回归|拟合|基线"
    ),
    "importance": _re(
        rf"{_W}(feature|variable|column|factor|predictor)s? (importance|ranking|rank|that matter)"
        rf"|{_W}importances?{_E}|key (feature|driver|factor|variable|predictor)s|{_W}driv(ing|ers?|es){_E}"
        rf"|matters? (the )?most|most (important|influential|predictive)|what (affects|influences|drives|determines)"
        rf"|which (feature|variable|column|factor)s? (matter|affect|influence|drive|are important|explain)|{_W}shap{_E}"
        r"|特征重要|重要特征|重要性|关键特征|关键因素|影响最大|主要因素|驱动因素|哪些特征|哪些因素|哪些变量|影响因素"
    ),
    "clean": _re(
        rf"{_W}(clean\w*|impute|imputation|imputing|dedup\w*|de-dup\w*|duplicates?|missing values?|fill (in )?(the )?(missing|nan|null|gaps)|nans?|null values|handle missing)"
        r"|清洗|清理|缺失|去重|填充|空值"
    ),
    "features": _re(
        rf"{_W}(feature engineering|engineer\w* (the )?(date |datetime |new )?features|target[ -]?encod\w*|one[ -]?hot|date(time)? features|calendar features|interaction\w*|encod(e|ing) (the )?categor\w*)"
        r"|特征工程|目标编码|交互特征|日期特征|特征构造|构造特征"
    ),
    "evaluate": _re(
        rf"{_W}(cross[ -]?validat\w*|cv{_E}|k[ -]?folds?|\d+[ -]?folds?|evaluat\w*|holdout|assess\w*)"
        r"|交叉验证|评估|验证集|\d+ ?折"
    ),
    "compare_engines": _re(
        rf"{_W}(cpu (vs\.?|versus|and|or|against|compared (to|with)) gpu|gpu (vs\.?|versus|and|or|against|compared (to|with)) cpu"
        rf"|speed ?ups?|gpu (acceleration|speed|performance|benefit)|compare (the )?engines|how much faster|benchmark (the )?(cpu|gpu))"
        r"|加速比|加速效果|gpu和cpu|cpu和gpu|gpu与cpu|cpu与gpu|gpu 和 cpu|cpu 和 gpu|gpu对比|对比gpu|cpu对比"
        r"|gpu\s*比\s*cpu|cpu\s*比\s*gpu|快多少|快几倍|提速"
    ),
    "register": _re(rf"{_W}(register\w*|registry|promot\w*|publish)" r"|注册|登记|发布"),
    "describe": _re(
        rf"{_W}(describe|summariz\w*|summary|overview|profil(e|ing)|explore|eda|inspect|look at)\b.*\b(data|dataset|file|table|columns|csv)"
        rf"|{_W}(describe|summariz\w*|profile|explore) (it|this){_E}|what('s| is) in (the|this|my|here|it)( (data|file|dataset|csv|table))?|data (summary|overview|profile)"
        rf"|{_W}(overview|summary|profile|rundown) of (the |this |my )?(csv|file|table|data|dataset|columns)|{_W}what (columns|fields)\b|does (this|the) (file|data|dataset|csv|table) (have|contain)"
        rf"|(data|dataset|file|csv|table|it)( set)? looks? like|{_W}what (does|do) [\w\s']{{1,40}} look like|{_W}how many (rows|columns|records|samples|observations|features|fields|entries|lines)"
        rf"|{_W}(number|count) of (rows|columns|records|samples|observations)|{_W}(schema|dtypes?|data types|column types|column names){_E}"
        rf"|{_W}(tell me|talk me through|walk me through) (about )?(the |this |my )?(data|dataset|file|csv|table|columns)"
        rf"|{_W}what (kind|sort|type)s? of (data|columns|fields|features|variables)|{_W}(first|top) (few |\d+ )?rows|{_W}head of (the )?(data|file|table)"
        rf"|{_W}(are there|is there|any|how many|how much|check (for|if)|count)( any)? (missing|null|nan|empty)( values| data| cells| entries)?"
        r"|描述数据|数据概况|数据概览|描述一下|探索数据|数据描述|看看数据|查看数据|数据摘要|有哪些列|哪些字段|数据.{0,4}(概况|概览|摘要)"
        rf"|{_W}(is|are) (this|the|my) (data|dataset|file|table|csv|classes|labels?|target)( set)? (balanced|imbalanced|skewed|clean)"
        rf"|{_W}how (big|large|many rows) is (this|the|my) (data|dataset|file|table|csv)|{_W}distribution of|{_W}class (balance|imbalance|distribution)"
        r"|长什么样|什么样子|多少行|多少列|基本情况|基本信息|有没有缺失|缺失.{0,3}(多少|情况|吗)|数据类型|字段类型|列的类型|看一下.{0,4}数据|介绍一下.{0,6}数据|统计信息"
        r"|看看.{0,4}数据|数据探索|探索性(数据)?分析|分布(情况)?|是否平衡|均衡吗|平衡吗"
    ),
    "show_runs": _re(
        rf"{_W}((show|list|display|see|view|print|get)( me)?( the| my| all| recent| latest| last)*( \d+)?( most)?( recent| latest| last)? (runs|experiments)"
        rf"|(last|latest|recent|previous|past) \d* ?runs|run history|runs? so far|what (did|have) (i|we) (run|tried)|runs? recently|recent(ly)? (runs|experiments))"
        r"|运行记录|实验记录|最近的运行|历史运行|最近的?\s*\d*\s*(个|次|条)?\s*(runs?|运行|实验)|列出.*运行|(show|list|列出|显示)\s*\d*\s*(个|次|条)?\s*(runs?|运行|实验)"
        r"|最近.{0,8}(runs?|运行|跑)|(跑过|运行过)的"
        rf"|{_W}(last|latest|previous|most recent) (run|experiment)s?{_E}|{_W}how did (my|the|our) (\w+ )?(run|experiment)s? (go|do)"
        rf"|{_W}leaderboard|{_W}(status|state) of (my|the|our|all) (\w+ )?runs|{_W}my runs{_E}|{_W}anything (trained|run|tried) (yet|so far)"
        rf"|{_W}(have|did) (i|we) (train|run|tri)\w* anything"
        rf"|{_W}how (did|was|were|is|are) (my|the|our|that) (\w+ )?(run|experiment|one|model)s?{_E}"
        r"|(上\s*1?\s*次|(最近|最后)\s*1\s*次).{0,6}(运行|结果|实验|跑)"
    ),
    "best_model": _re(
        rf"{_W}(best|top|winning|strongest) (model|run)s?{_E}|{_W}(which|what) (of (my|the|our|these) )?(model|run)s?\b.*\b(best|highest|lowest|top|max\w*|min\w*|smallest|largest)"
        rf"|{_W}(best|highest|lowest|top|smallest|largest|strongest)\b[\w\s'-]{{0,40}}\b(model|run){_E}"
        r"|最好的模型|最佳模型|最优模型|最好的运行|哪个(模型|运行|实验).*(最高|最低|最好|最佳|最优|最大|最小)|最(高|低|好|佳|优)的(模型|运行)"
        r"|(最高|最低|最好|最佳|最优|最大|最小).{0,6}(哪个|模型|运行)"
        rf"|{_W}(best|highest|lowest|top)\b.{{0,30}}\b(so far|yet|to date|ever){_E}|{_W}(the )?best (one|result|score)s?{_E}"
        # a question about results already had: which one scored best / had the lowest rmse /
        # won; a bare superlative and a metric ("top accuracy?")
        rf"|{_W}(which|what|who)\b((?!feature|factor|driver|variable|column|predictor|input)[\w\s'-]){{0,40}}\b(best|highest|lowest|top|won|wins|winner|leads?){_E}(?![\w\s]{{0,12}}(feature|factor|driver|variable|column|predictor|input))"
        rf"|^\W*(show( me)? )?(the )?(best|top|highest|lowest|winning)( \w+)? ({_RESULT_WORDS})s?\W*$"
        rf"|{_W}(winner|winning (run|model|one)) (by|on|for) "
        r"|哪(次|个|一个|一次|组)?.{0,10}(最高|最低|最好|最佳|最优)|最(好|高|佳|优)的(结果|成绩|效果|分数|得分|准确率)"
        r"|谁.{0,6}(最好|最高|最佳)|(目前|到目前为止|迄今|至今).{0,8}(最好|最高|最佳|最优)"
    ),
    "compare_runs": _re(
        rf"{_W}compare\b.*\bruns?{_E}|{_W}runs?\b.*\b(side by side|compare|comparison|diff|vs\.?|versus)|{_W}diff\b.*\bruns?{_E}"
        rf"|{_W}compare (the )?(last|latest|previous|recent) (\d+|both|ones?|runs?|models?){_E}|{_W}compare (them|both|these|those)( runs| models)?{_E}"
        r"|比较.*运行|对比.*运行|(对比|比较|diff).{0,6}runs?|(对比|比较)(一下)?(最近|最后|上)"
        # a bare "compare" in a conversation: the runs it has so far
        r"|^\W*(对比|比较)(一下)?\W*$|^\W*compare( (them|these|those|the runs))?\W*$"
    ),
    "show_study": _re(rf"{_W}(optuna )?stud(y|ies){_E}" r"|研究|调参记录|study"),
    "follow_up": _re(
        rf"{_W}(now )?(try|use|switch to|swap in|instead|again|rerun|re-run|redo|one more time)"
        r"|再试|试试|试一下|换成|改用|换用|重新|再来|再跑"
    ),
    "quick": _re(
        rf"{_W}(quick|fast|simple|rough|first)( \w+)? (baseline|model|look|try|pass)|{_W}baseline{_E}"
        r"|快速|基线|简单模型"
    ),
    "classification": _re(
        rf"{_W}(classif\w*|binary|whether|yes[ /]no|categori[sz]e|churns? or not)"
        r"|分类|是否|二分类|多分类"
    ),
    "regression": _re(
        rf"{_W}(regression|regressor|regress|how much|how many|continuous)"
        r"|(?<!逻辑)(?<!逻辑斯蒂)回归|多少"
    ),
    "show": _re(
        rf"{_W}(show|list|display|what is|what's|which is|tell me|get|print|view|see|find)"
        r"|显示|列出|查看|展示|哪个|哪一个|看看|是什么|给我"
    ),
}

#: what a request to clean data says it should do (a question about missing values is not one)
CLEAN_ACTION = re.compile(
    rf"{_W}(fill\w*|imput\w*|drop\w*|remov\w*|handl\w*|replac\w*|clean\w*|dedup\w*|fix\w*)"
    r"|填充|填补|删除|处理|清洗|清理|去重|补全"
)
#: one run, the latest ("how did my last run go?")
ONE_RUN = re.compile(
    rf"{_W}(last|latest|previous|most recent) (run|experiment|one){_E}|上\s*1?\s*次|(最近|最后)\s*1\s*次"
)
#: words that point back at the session's model ("tune it", "try that again with 100 trials")
BACK_REFERENCE = re.compile(
    rf"{_W}(it|that|this|them|same|again|(the|that|this|my|our) (model|one)|(some )?more|further|again){_E}"
    r"|它|这个|那个|刚才|同样|同一个|再"
)
#: "across all experiments", "every run", "所有实验": a run listing beyond the conversation
ALL_EXPERIMENTS = re.compile(
    rf"{_W}(all|every|each|any) (of )?(the |my )?(experiments?|runs)|{_W}across (all |every )?(the )?experiments"
    r"|所有(的)?(实验|运行|runs?)|全部(的)?(实验|运行|runs?)|每个实验"
)
#: "which of my runs had the best f1": a question about the best run, not a list of runs
SUPERLATIVE = re.compile(rf"{_W}(best|highest|lowest|top|worst)\b|最好|最佳|最优|最高|最低")
#: words that compare two things, for runs named only by their ids ("3fa9c2 vs 7b01de")
COMPARING = re.compile(
    rf"{_W}(compar\w*|diff\w*|vs\.?|versus|against|stack (up|against)|side[ -]by[ -]side|next to|better|worse)"
    r"|对比|比较|区别|差异|不同|哪个好|哪个更好"
)
#: a run id or a prefix of one: hexadecimal, at least four characters, with a digit
RUN_ID_PREFIX = re.compile(
    r"(?<![\w./:-])([0-9a-f]{32}|(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{4,31})(?![\w/:-])"
)
#: the best model within a time budget: the full AutoML search ("best model … in 10 minutes")
BEST_MODEL = re.compile(
    rf"{_W}(best|strongest|most accurate|optimal|top|highest[- ]scoring|as good( a model)? as)( possible| you can( find| get| build)?)? (possible )?([a-z]+ )?(model|one|predictor|classifier|regressor|result)s?"
    rf"|{_W}(best|strongest|most accurate) (you|we) can{_E}"
    r"|最好的模型|最佳模型|最优模型|最强的模型|最准的模型|最好的|最佳的|最优的"
)

# "logistic regression" names a model, not a regression task.
LOGISTIC = re.compile(rf"{_W}logistic( regression)?{_E}|{_W}logit{_E}|逻辑回归|逻辑斯蒂")


def _neg(*things: str) -> re.Pattern[str]:
    body = "|".join(things)
    return re.compile(
        rf"{_W}(no|without|skip(ping)?|don'?t|do not|never|avoid|exclude|disable|turn off|leave out|omit)"
        rf"( (any|the|a|do|doing|use|using|want|need|bother( with)?|remove|removing|drop|dropping|apply|applying|run|running|it|with|any more)){{0,3}} ({body})"
        rf"|(不要|不用|无需|不需要|不做|跳过|不进行|别|禁用|关闭|去掉)\s*(做|进行|用|使用)?\s*({body})"
    )


NEGATIONS: dict[str, re.Pattern[str]] = {
    "tune": _neg(
        r"tun(e|ing)( it| them| the \w+)?",
        r"hyper[ -]?parameter (tuning|search|optimization)",
        r"optimiz(e|ing|ation)",
        r"search",
        r"hpo",
        r"调参",
        r"调优",
        r"超参数?(搜索|优化)?",
        r"优化参数",
    ),
    "warm_start": _neg(
        r"(the )?(meta[ -]learned )?warm[ -]?start(ing)?", r"prior", r"热启动", r"预热"
    ),
    "features": _neg(
        r"feature engineering",
        r"engineered features",
        r"engineering",
        r"new features",
        r"feature creation",
        r"特征工程",
        r"构造特征",
    ),
    "clean": _neg(
        r"cleaning",
        r"clean(ing)? (the )?data",
        r"data cleaning",
        r"imputation",
        r"清洗",
        r"数据清洗",
    ),
    "early_stopping": _neg(
        r"early[ -]?stopping",
        r"early stop",
        r"stop(ping)? early",
        r"early termination",
        r"pruning",
        r"提前停止",
        r"早停",
    ),
    "target_encoding": _neg(r"target[ -]?encoding", r"target encode", r"目标编码"),
    "evaluate": _neg(r"cross[ -]?validation", r"cv", r"evaluation", r"交叉验证"),
    "importance": _neg(r"(feature )?importance", r"特征重要性"),
    "datetime": _neg(
        r"date(time)? (features|ones|parts)",
        r"(the )?datetime( ones)?",
        r"calendar features",
        r"日期特征",
        r"时间特征",
    ),
    "duplicates": _neg(r"(duplicate|dedup)\w*( removal)?", r"(removing )?duplicates", r"去重"),
    "interactions": _neg(r"interactions?( features)?", r"交互特征"),
}
KEEP_GOING = re.compile(
    rf"{_W}(keep going|run all (the )?trials|all \d+ trials|even if it plateaus|even if (it|the score|progress) (stops improving|stalls|plateaus)|until the (end|budget)|use the (whole|full|entire) budget|no early stop\w*|full budget)"
    r"|跑满|不要提前停止|不要早停|即使不再提升|即使没有提升"
)
STOP_EARLY = re.compile(
    rf"{_W}(early[ -]?stop\w*|stop (early|when|if)|stops? improving|plateaus|patience|no longer improv\w*|converge\w*)"
    r"|提前停止|早停|不再提升|收敛"
)
STRATEGIES: list[tuple[str, re.Pattern[str]]] = [
    ("median", re.compile(rf"{_W}median{_E}|中位数")),
    (
        "mean",
        re.compile(
            rf"{_W}(mean|average)[ -]?(imputation|impute|fill|value)|{_W}(fill|impute|replace)\w*\b.*\b(mean|average)s?{_E}|均值|平均值"
        ),
    ),
    ("mode", re.compile(rf"{_W}(mode|most frequent)( value| imputation)?{_E}|众数")),
    (
        "drop",
        re.compile(
            rf"{_W}(drop|remove|delete|discard)\w*\b.*\b(rows?|records?|samples?)\b.*\b(missing|nan|null|empty)|{_W}(drop|remove|delete)\w* (the )?(missing|incomplete|nan|null)|(删除|删掉|丢弃|去掉|剔除).{{0,6}}(缺失|空值)"
            rf"|(缺失|空值)值?[^,，。]{{0,6}}(drop|删|丢弃|去掉)|{_W}missing\w*\s+(drop|remove)\w*"
        ),
    ),
]
KEEP_DUPLICATES = re.compile(rf"{_W}(keep|retain|leave|preserve)( the| all)? duplicate|保留重复")
#: a request to predict the rows of a named file ("use the best model on holdout.csv")
PREDICT_FILE = re.compile(
    r"predict|score|inference|apply|预测|推理|打分"
    rf"|{_W}(use|run|try)\b.{{0,40}}\b(model|champion|challenger)\b.{{0,20}}\b(on|for|against|with){_E}"
    rf"|{_W}(label|classify)\b"
)
MODEL_URI = re.compile(r"(?<![\w/])(models:/[^\s,;'\"]+|runs:/[^\s,;'\"]+)")
FILE_RE = re.compile(
    r"(?<![\w./\\-])((?:[\w.\-]+[/\\])*[\w.\-]+\.(?:csv|tsv|parquet|pq|jsonl|ndjson|json|xlsx|xls))(?![\w])"
)
