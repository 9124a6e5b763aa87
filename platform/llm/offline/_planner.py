"""The offline planner: rules over a normalised prompt and the data profile.

It reads intents (train, tune, importance, clean, …), a model family, numbers, metrics,
negations and the target, picks a workflow template, and adjusts the template's steps.
"""

from __future__ import annotations

import re
from typing import Any

from mlpilot.platform.errors import PlanError, UnplacedRequestError
from mlpilot.platform.llm._base import Planner, PlanningRequest, PlanResult
from mlpilot.platform.llm.offline import _lexicon as lex
from mlpilot.platform.llm.offline import _numbers as num
from mlpilot.platform.llm.offline._target import find_mentions, label_column, resolve_target
from mlpilot.platform.llm.offline._text import correct_typos, normalize
from mlpilot.platform.ml import families
from mlpilot.platform.plan import Plan, Step, validate_plan
from mlpilot.platform.plan.validate import describe_candidates

_NAME = r"[\"'`“”‘’]?([a-z0-9][\w.\-]*[a-z0-9]|[a-z0-9])[\"'`“”‘’]?"
_REGISTER_NAME = [
    re.compile(
        rf"(?:register\w*|save|publish|promot\w*)\b.*?\b(?:as|under|named|called|call it|name it|with (?:the )?name)\s+(?:the )?(?:name |model )?{_NAME}"
    ),
    re.compile(rf"\b(?:call|name) it\s+{_NAME}"),
    re.compile(rf"(?:注册为|注册成|注册到|命名为|名为|名称为|叫做|叫)\s*{_NAME}"),
    re.compile(rf"(?:model name|registered model|name)\s*[=:]\s*{_NAME}"),
]
_ALIAS = [
    re.compile(rf"(?<![a-z])(?:alias|tag(?:ged)?)(?![a-z])\s*(?:of|as|=|:)?\s*@?{_NAME}"),
    re.compile(r"@([a-z][\w\-]*)"),
    re.compile(
        r"(?:as|to) (?:the |our )?(champion|challenger|production|staging|candidate|baseline)\b"
    ),
    re.compile(rf"(?:别名|别名为|设为|设置为|标记为)\s*{_NAME}"),
]
_STUDY_NAMES = [
    re.compile(rf"stud(?:y|ies)\s+(?:named |called |for )?{_NAME}"),
    re.compile(rf"研究\s*{_NAME}"),
    re.compile(rf"{_NAME}\s*(?:的)?\s*(?:optuna )?(?:study|研究)"),
]
_RUN_ID = re.compile(
    r"(?<![\w-])([0-9a-f]{32}|[a-z0-9]*\d[a-z0-9]*[a-z][a-z0-9]*|[a-z][a-z0-9]*\d[a-z0-9]*|[0-9a-f]{6,})(?![\w-])"
)
_NOT_IDS = {
    "r2",
    "f1",
    "top5",
    "top10",
    "cv5",
    "k8s",
    "3d",
    "2d",
    "gpu",
    "cpu",
    "utf8",
    "md5",
    "sha256",
    "s3",
    "ec2",
}
_STOP_NAMES = {
    "registry",
    "champion",
    "the",
    "a",
    "an",
    "model",
    "it",
    "this",
    "that",
    "best",
    "with",
    "and",
    "alias",
    "version",
    "named",
    "called",
    "name",
    "for",
    "to",
    "of",
    "optuna",
    "show",
    "me",
    "my",
    "latest",
    "last",
    "recent",
    "results",
    "result",
    "details",
}


_AT_MOST = re.compile(
    r"(?:at most|up to|max(?:imum)?(?: of)?|no more than|limit(?:ed)? to|最多|不超过)\s*(\d+)"
)
#: patterns whose numbers the planner reads; any other number is reported as not understood
_READ_NUMBERS = [
    *num.TRIALS,
    *num.FOLDS,
    *num.TOP_K,
    *num.RUN_LIMIT,
    num.DURATION,
    _AT_MOST,
    lex.FILE_RE,
    lex.MODEL_URI,
]


class OfflinePlanner(Planner):
    """Rule-based planner used when no LLM key is set (and as the LLM planner's fallback)."""

    name = "offline"

    def plan(self, request: PlanningRequest) -> PlanResult:
        parsed = Parsed(request)
        plan = parsed.build()
        parsed.report_unread(plan)
        validated = validate_plan(plan, request.registry, request.profile, check_files=False)
        return PlanResult(
            plan=validated.plan,
            planner=self.name,
            task=validated.task,
            notes=validated.notes + parsed.notes,
        )


def asks_to_compare(text: str) -> bool:
    """Whether a request compares what it asks for with something ("compare with xgboost",
    "和随机森林比较一下"): the chat then shows the new run beside the earlier ones."""
    return bool(lex.COMPARING.search(text.lower()))


class Parsed:
    """The meaning read off one prompt."""

    def __init__(self, request: PlanningRequest) -> None:
        self.request = request
        self.notes: list[str] = []
        self.bare = False  # no task word at all: only a clearly named column makes it a run
        profile = request.profile
        protected = set()
        if profile is not None:
            for column in profile.columns:
                protected.update(re.split(r"[\s_\-]+", column.name.lower()))
        self.text = num.fix_units(correct_typos(normalize(request.prompt), protected))
        self.intents = {name for name, pattern in lex.INTENTS.items() if pattern.search(self.text)}
        self.negated = {
            name for name, pattern in lex.NEGATIONS.items() if pattern.search(self.text)
        }
        self.model = self._model()
        self.metric = self._metric()
        budget_free = num.strip_durations(self.text)
        self.trials = num.first_int(num.TRIALS, budget_free, 1, 10000)
        self.bad_trials = num.out_of_range(num.TRIALS, budget_free, 1, 10000)
        self.timeout_s = num.duration_seconds(self.text)
        self.folds = num.first_int(num.FOLDS, self.text, 2, 50)
        self.top_k = num.first_int(num.TOP_K, self.text, 1, 1000)
        self.files = [m.group(1) for m in lex.FILE_RE.finditer(request.prompt)]

    # -- reading ----------------------------------------------------------------------------
    def _model(self) -> str | None:
        named, generic = lex.model_res()
        name = _earliest(self.text, named) or _earliest(self.text, generic)
        return lex.BOOSTING_DEFAULT if name == "boosting" else name

    def _metric(self) -> str | None:
        return _earliest(self.text, lex.METRIC_RES)

    def has(self, intent: str) -> bool:
        return intent in self.intents

    # -- building ---------------------------------------------------------------------------
    def build(self) -> Plan:
        query = self._query_plan()
        if query is not None:
            return query
        wants_model = (
            self.has("train")
            or self.has("tune")
            or self._best_within_budget()
            or self.has("compare_engines")
            or self.has("evaluate")
            or (self.model is not None and not self.has("register"))
            or self.has("follow_up")
        )
        wants_data_work = (
            wants_model
            or self.has("importance")
            or self.has("clean")
            or self.has("features")
            or self.has("quick")
        )
        tail = self._tail_steps()
        if not wants_data_work or (self.request.profile is None and not self._session_data()):
            if tail:
                template = self._tail_template(tail)
                if template in self.request.templates:
                    # the template's defaults for what the prompt leaves out ("register the
                    # best one" gets the alias register-best gives)
                    defaults = self.request.templates.get(template).params
                    for step in tail:
                        for key, value in step.args.items():
                            if value is None and defaults.get(key) is not None:
                                step.args[key] = defaults[key]
                return Plan(
                    steps=tail, template=template, rationale=self._rationale(tail, template)
                )
            if self.request.profile is None and wants_data_work:
                raise PlanError("this request needs a data file", hint="pass it with --data FILE")
            if self.request.profile is not None:
                wants_model = True  # a bare target mention ("quick look at price") means: model it
                self.bare = True  # ... but only a column it names clearly: never a guess
            else:
                raise PlanError(
                    "the request names no task mlpilot knows",
                    hint="ask to train, tune, clean, explain features, predict a file, register a model or show runs",
                )
        return self._pipeline_plan(wants_model, tail)

    def _best_within_budget(self) -> bool:
        """ "The best model you can … within 10 minutes": the full AutoML search."""
        return bool(
            self.timeout_s
            and lex.BEST_MODEL.search(self.text)
            and (self.request.profile is not None or self._session_data())
            and "tune" not in self.negated
        )

    def report_unread(self, plan: Plan) -> None:
        """Put every value the planner could not read into the rationale, with what it used."""
        found = []
        for match in num.VAGUE_COUNT.finditer(self.text):
            used = _used_for(plan, match.group(2))
            found.append(f"{match.group(1)!r}" + (f" ({used})" if used else ""))
        found += [
            f"{phrase!r} (ignored)" for phrase in num.unread_numbers(self.text, _READ_NUMBERS)
        ]
        if found:
            plan.rationale = (
                (plan.rationale or "").rstrip() + " Could not read: " + ", ".join(found) + "."
            )

    def _session_model(self) -> str | None:
        """ "tune it", "try it with 100 trials": the model family the session last trained."""
        family = self.request.context.get("model")
        if family and lex.BACK_REFERENCE.search(self.text):
            self.notes.append(f"model {family!r} carried over from the session")
            return str(family)
        return None

    def _session_data(self) -> str | None:
        return self.request.context.get("data_path")

    def _query_plan(self) -> Plan | None:
        pipeline_words = (
            self.has("train") or self.has("tune") or self.has("importance") or self.has("clean")
        )
        compared = self._compared_runs(pipeline_words)
        if compared is not None:
            return _single("compare_runs", {"run_ids": compared})
        if self.has("show_study") and (self.has("show") or not pipeline_words):
            return _single("show_study", {"name": self._original_case(self._study_name())})
        if (
            self.has("show_runs")
            and not (self.has("register") or self.has("tune"))
            and not (self.has("best_model") and lex.SUPERLATIVE.search(self.text))
        ):
            args: dict[str, Any] = {"limit": self._run_limit()}
            if lex.ALL_EXPERIMENTS.search(self.text):
                args["scope"] = "all"
            return _single("show_runs", args)
        if (
            self.has("best_model")
            and not self.has("register")
            and not self.has("tune")
            and (self.has("show") or not self.has("train"))
            and not self._best_within_budget()
            and not (self.files and lex.PREDICT_FILE.search(self.text))
        ):
            return _single("show_best_model", {"metric": self.metric})
        if (
            self.has("describe")
            and not (self.has("tune") or self.has("importance"))
            and not re.search(r"\b(train|fit)\b|训练", self.text)
            and not lex.CLEAN_ACTION.search(self.text)
        ):
            return _single("describe_data", {})
        return None

    def _run_limit(self) -> int:
        limit = num.first_int(num.RUN_LIMIT, self.text, 1, 1000)
        if limit is None and lex.ONE_RUN.search(self.text):
            return 1  # "how did my last run go?"
        return limit or 10

    def _compared_runs(self, pipeline_words: bool) -> list[str] | None:
        """The runs a comparison names: ids or id prefixes, or the session's last runs."""
        if self.has("compare_runs"):
            ids = self._run_ids()
            if len(ids) >= 2:
                return ids
            if not pipeline_words:
                last = self._last_runs()
                wanted = num.first_int(num.RUN_LIMIT, self.text, 3, 50)
                if not last and wanted:  # no ids means "the last two" to compare_runs
                    raise PlanError(
                        f"comparing the last {wanted} runs needs them named outside a chat",
                        hint="give their ids (mlpilot runs list shows them), or ask in mlpilot chat",
                    )
                return last or ids
            return None
        prefixes = list(dict.fromkeys(m.group(1) for m in lex.RUN_ID_PREFIX.finditer(self.text)))
        if (
            len(prefixes) >= 2
            and self.request.profile is None
            and (lex.COMPARING.search(self.text) or not self.intents - {"show"})
        ):
            return prefixes  # "3fa9c2 vs 7b01de": MLflow ids are lower-case hexadecimal
        return None

    def _last_runs(self) -> list[str]:
        """ "compare the last two" in a session: its most recent runs, oldest first."""
        runs = [  # runs that trained something: a registration has nothing to compare
            r["run_id"] for r in self.request.context.get("runs") or [] if r.get("metrics")
        ]
        wanted = num.first_int(num.RUN_LIMIT, self.text, 2, 50) or 2
        return runs[-wanted:] if len(runs) >= 2 else []

    def _study_name(self) -> str | None:
        for pattern in _STUDY_NAMES:
            for match in pattern.finditer(self.text):
                if match.group(1) not in _STOP_NAMES:
                    return match.group(1)
        return None

    def _run_ids(self) -> list[str]:
        tail = re.split(r"\bruns?\b|运行", self.text, maxsplit=1)
        text = tail[1] if len(tail) > 1 else self.text
        ids = []
        for match in _RUN_ID.finditer(text):
            token = match.group(1)
            if token not in _NOT_IDS and token not in ids and not token.isdigit():
                ids.append(token)
        return [i if re.fullmatch(r"[0-9a-f]+", i) else self._original_case(i) or i for i in ids]

    def _original_case(self, token: str | None) -> str | None:
        if token is None:
            return None
        match = re.search(re.escape(token), self.request.prompt, flags=re.IGNORECASE)
        return match.group(0) if match else token

    def _tail_steps(self) -> list[Step]:
        steps = []
        if self.has("register"):
            steps.append(Step("register_model", self._register_args()))
        if self.files and lex.PREDICT_FILE.search(self.text):
            data = self.request.data_path
            files = [f for f in self.files if data is None or not data.endswith(f)]
            if files:
                args: dict[str, Any] = {"data_path": files[0]}
                if len(files) > 1:
                    args["output_path"] = files[1]
                uri = lex.MODEL_URI.search(self.request.prompt)
                if uri:
                    args["model_uri"] = uri.group(1)
                steps.append(Step("predict", args))
        return steps

    def _register_args(self) -> dict[str, Any]:
        name = alias = None
        for pattern in _REGISTER_NAME:
            match = pattern.search(self.text)
            if match and match.group(1) not in _STOP_NAMES:
                name = match.group(1)
                break
        for pattern in _ALIAS:
            match = pattern.search(self.text)
            if match and match.group(1) not in _STOP_NAMES - {"champion"}:
                alias = match.group(1)
                break
        if name in {"champion", "challenger", "production", "staging"} and alias in (None, name):
            alias, name = name, None
        if name is None:
            target = self.request.target or self.request.context.get("target")
            name = f"{target}-model" if target else f"{self.request.experiment}-model"
            self.notes.append(f"no model name given: registering as {name!r}")
        args: dict[str, Any] = {"name": self._original_case(name), "alias": alias}
        if self.metric:
            args["metric"] = self.metric
        best = self.request.context.get("best_run") or {}
        wants_best = re.search(r"\bbest\b|最好|最佳|最优", self.text)
        if best.get("run_id") and wants_best and not (self.has("train") or self.has("tune")):
            args["run_id"] = best["run_id"]  # the session's best run, not the whole experiment's
        elif (
            self.request.context.get("last_run")
            and re.search(r"\b(it|that|this|the last|last one)\b|刚才|上一个|这个", self.text)
            and not (self.has("train") or self.has("tune"))
        ):
            args["run_id"] = self.request.context["last_run"]
        return args

    def _tail_template(self, tail: list[Step]) -> str:
        tools = [s.tool for s in tail]
        if tools == ["register_model"]:
            return "register-best"
        if tools == ["predict"]:
            return "batch-predict"
        return "custom"

    def _target(self) -> str:
        request = self.request
        profile = request.profile
        assert profile is not None
        if request.target is not None:
            return request.target
        found = resolve_target(self.text, profile)
        if found.column is not None and not found.guessed:
            return found.column
        if self.bare:
            raise UnplacedRequestError(
                "mlpilot could not place this request: it names no task and no column",
                hint="ask to train, tune or explain a column (e.g. 'predict price with a "
                "random forest'), or ask about your runs (e.g. 'which run was best?')",
            )
        remembered = request.context.get("target")
        if remembered and profile.column(remembered) is not None and not found.cued:
            self.notes.append(f"target {remembered!r} carried over from the session")
            return remembered
        if found.column is not None:
            self.notes.append(found.guess_note())
            return found.column
        # a label-named column beats silence and a bare uncued guess, never a named column
        weak = not found.problem or (found.problem == "unsure" and not found.cued)
        label = label_column(profile) if weak else None
        if label is not None:
            self.notes.append(
                f"target guessed: the request names no column; {label!r} says it is the "
                "label (pass --target COL for another)"
            )
            return label
        if found.problem:
            raise found.error()
        raise PlanError(
            "the request does not say which column to predict",
            hint=f"name it in the prompt or pass --target COL; candidates: {describe_candidates(profile)}",
        )

    def _task(self) -> str:
        if self.has("classification") and not self.has("regression"):
            return "classification"
        regression = lex.INTENTS["regression"].search(lex.LOGISTIC.sub(" ", self.text))
        if regression and not self.has("classification"):
            return "regression"
        return "auto"

    def _pipeline_plan(self, wants_model: bool, tail: list[Step]) -> Plan:
        request = self.request
        data_path = request.data_path or self._session_data()
        target = self._target()
        task = self._task()
        tune = self.has("tune") and "tune" not in self.negated
        model = self.model or self._session_model()
        last = self.request.context.get("last_plan") or {}
        last_tune = next(
            (s for s in last.get("steps", []) if s.get("tool") == "optimize_model"), None
        )
        explicit = self.has("train") or self.has("tune")
        if last_tune and not explicit and "tune" not in self.negated and model is not None:
            # "now try xgboost" after a tuning run: tune the new family the same way
            tune = True
            if self.trials is None and last_tune.get("args", {}).get("trials"):
                self.trials = last_tune["args"]["trials"]
        if self._best_within_budget():
            tune, model = True, model or "auto"  # the full AutoML search, within the budget
        if self.trials is not None and "tune" not in self.negated:
            tune = True  # "xgboost with 50 trials": a count of trials is a search
        if model == "auto" and "tune" not in self.negated:
            tune = True  # "try every model" is a search across families
        template, params = self._choose_template(wants_model, tune, model)
        plan = request.templates.get(template).instantiate(
            params, data_path=data_path, target=target, task=task
        )
        self._adjust(plan, tune, model)
        if self.has("compare_engines") and plan.step("compare_engines") is None:
            plan.steps.append(Step("compare_engines", {}))
        plan.steps.extend(tail)
        plan.rationale = self._rationale(plan.steps, template, target)
        if request.profile is not None:
            from mlpilot.adapters import detect_adapter

            plan.adapter = detect_adapter(request.prompt, request.profile.names)
        return plan

    def _choose_template(
        self, wants_model: bool, tune: bool, model: str | None
    ) -> tuple[str, dict[str, Any]]:
        if self.has("compare_engines") and not tune:
            default = families.default(families.COMPARE).name
            return "engine-comparison", {"model": model if model not in (None, "auto") else default}
        if tune:
            if model in (None, "auto"):
                return "full-automl", {
                    "trials": self.trials,
                    "timeout_s": self.timeout_s
                    if self.timeout_s
                    else (None if self.trials else 600),
                }
            return f"hpo-{model}", {"trials": self.trials or 50, "metric": self.metric}
        only_importance = (
            self.has("importance")
            and not re.search(r"\b(train|fit|build)\w*|训练|建模", self.text)
            and model is None
        )
        if only_importance and not self.has("evaluate"):
            return "feature-discovery", {"top_k": self.top_k or 10}
        if (
            self.has("clean")
            and not wants_model
            and not self.has("importance")
            and not self.has("features")
        ):
            return "clean-only", {"strategy": self._strategy() or "auto"}
        if "features" in self.negated:
            return "no-feature-engineering", {"model": model or "auto"}
        if self.has("quick") and not self.has("features") and not self.has("importance"):
            return "quick-baseline", {"model": model or "auto"}
        if re.search(r"interaction|交互", self.text):
            return "interaction-search", {"model": model or "auto"}
        return "train-evaluate", {"model": model or "auto", "cv_folds": self.folds or 5}

    def _strategy(self) -> str | None:
        for name, pattern in lex.STRATEGIES:
            if pattern.search(self.text):
                return name
        return None

    def _adjust(self, plan: Plan, tune: bool, model: str | None) -> None:
        steps = plan.steps
        has = lambda tool: any(s.tool == tool for s in steps)  # noqa: E731
        strategy = self._strategy()
        if strategy and has("clean_data"):
            next(s for s in steps if s.tool == "clean_data").args["strategy"] = strategy
        if ("duplicates" in self.negated or lex.KEEP_DUPLICATES.search(self.text)) and has(
            "clean_data"
        ):
            next(s for s in steps if s.tool == "clean_data").args["drop_duplicates"] = False
        if "clean" in self.negated and not strategy:
            plan.steps = steps = [s for s in steps if s.tool != "clean_data"]
        if "features" in self.negated:
            plan.steps = steps = [s for s in steps if s.tool != "engineer_features"]
        elif self.has("features") and not has("engineer_features"):
            index = next(
                i for i, s in enumerate(steps) if s.tool not in ("load_data", "clean_data")
            )
            steps.insert(index, Step("engineer_features", {}))
        for step in steps:
            if step.tool == "engineer_features":
                if (
                    re.search(r"date|time|calendar|日期|时间", self.text)
                    and "datetime" not in self.negated
                ):
                    step.args["datetime"] = True
                if "datetime" in self.negated:
                    step.args["datetime"] = False
                if (
                    re.search(r"target[ -]?encod|目标编码", self.text)
                    and "target_encoding" not in self.negated
                ):
                    step.args["target_encoding"] = True
                if "target_encoding" in self.negated:
                    step.args["target_encoding"] = False
                if re.search(r"interaction|交互", self.text) and "interactions" not in self.negated:
                    step.args["interactions"] = True
                    most = _AT_MOST.search(self.text)
                    if most and 1 <= int(most.group(1)) <= 100:
                        step.args["max_interactions"] = int(most.group(1))
                if "interactions" in self.negated:
                    step.args["interactions"] = False
            if step.tool == "optimize_model":
                if self.trials is None and self.bad_trials:
                    raise PlanError(
                        f"{self.bad_trials!r} is not a budget a search can use",
                        hint="ask for 1 to 10000 trials, or a time budget such as '10 minutes'",
                    )
                if self.trials is not None:
                    step.args["trials"] = self.trials
                if self.timeout_s is not None:
                    step.args["timeout_s"] = self.timeout_s
                if self.metric:
                    step.args["metric"] = self.metric
                if "warm_start" in self.negated:
                    step.args["warm_start"] = False
                if lex.KEEP_GOING.search(self.text) or "early_stopping" in self.negated:
                    step.args["early_stopping"] = False
                elif lex.STOP_EARLY.search(self.text):
                    step.args["early_stopping"] = True
            if step.tool == "train_model" and model not in (None, "auto"):
                step.args["model"] = model
            if step.tool == "feature_importance":
                if self.top_k:
                    step.args["top_k"] = self.top_k
                if re.search(r"permutation|置换|排列", self.text):
                    step.args["method"] = "permutation"
                elif re.search(r"impurity|gini|不纯度|基尼", self.text):
                    step.args["method"] = "impurity"
        model_step = next(
            (i for i, s in enumerate(steps) if s.tool in ("train_model", "optimize_model")), None
        )
        if (
            (self.has("importance") or self.top_k)
            and "importance" not in self.negated
            and not has("feature_importance")
        ):
            steps.append(Step("feature_importance", {"top_k": self.top_k or 10}))
        if "importance" in self.negated:
            plan.steps = steps = [s for s in steps if s.tool != "feature_importance"]
        self._place_importance(steps)
        if model_step is not None and "evaluate" not in self.negated:
            wants_cv = self.folds is not None or re.search(
                r"cross[ -]?valid|\bcv\b|交叉验证|评估|evaluat", self.text
            )
            if wants_cv and not has("evaluate_model"):
                steps.insert(model_step + 1, Step("evaluate_model", {"cv_folds": self.folds or 5}))
            for step in steps:
                if step.tool == "evaluate_model" and self.folds:
                    step.args["cv_folds"] = self.folds
        if "evaluate" in self.negated:
            plan.steps = [s for s in steps if s.tool != "evaluate_model"]

    def _place_importance(self, steps: list[Step]) -> None:
        """Put feature_importance where the prompt puts it: before the model step when asked first.

        The runtime always computes importance on the plan's final model, wherever it sits.
        """
        index = next((i for i, s in enumerate(steps) if s.tool == "feature_importance"), None)
        model_index = next(
            (i for i, s in enumerate(steps) if s.tool in ("train_model", "optimize_model")), None
        )
        if index is None or model_index is None or not self.has("importance"):
            return
        asked = lex.INTENTS["importance"].search(self.text)
        model_words = [
            m.start()
            for pattern in (lex.INTENTS["tune"], lex.INTENTS["train"])
            if (m := pattern.search(self.text))
        ]
        if asked and model_words and asked.start() < min(model_words):
            step = steps.pop(index)
            steps.insert(model_index, step)

    def _rationale(
        self, steps: list[Step], template: str | None = None, target: str | None = None
    ) -> str:
        parts = [f"template {template}" if template else "custom plan"]
        if target:
            parts.append(f"target {target!r}")
        parts.extend(n for n in self.notes if n.startswith("target guessed"))
        parts.append("steps: " + " → ".join(s.tool for s in steps))
        return "Offline planner: " + "; ".join(parts) + "."


_UNIT_ARGS = {
    "trial": ("optimize_model", "trials"),
    "iteration": ("optimize_model", "trials"),
    "round": ("optimize_model", "trials"),
    "trie": ("optimize_model", "trials"),
    "attempt": ("optimize_model", "trials"),
    "fold": ("evaluate_model", "cv_folds"),
    "minute": ("optimize_model", "timeout_s"),
    "hour": ("optimize_model", "timeout_s"),
}


def _used_for(plan: Plan, unit: str) -> str | None:
    """What the plan used where the prompt gave a vague count of ``unit``."""
    tool, arg = _UNIT_ARGS.get(unit.rstrip("s"), (None, None))
    step = plan.step(tool) if tool else None
    if step is None or arg is None:
        return None
    return f"used {arg}={step.args.get(arg)!r}"


def _earliest(text: str, patterns: list[tuple[str, re.Pattern[str]]]) -> str | None:
    """The name whose pattern matches first in ``text``; longer phrases listed earlier win
    where they overlap, because each match is blanked out before shorter patterns run."""
    found: list[tuple[int, str]] = []
    for name, pattern in patterns:
        for match in pattern.finditer(text):
            found.append((match.start(), name))
            text = text[: match.start()] + " " * (match.end() - match.start()) + text[match.end() :]
    return min(found)[1] if found else None


def _single(tool: str, args: dict[str, Any]) -> Plan:
    return Plan(steps=[Step(tool, args)], template="query", rationale=f"Query: {tool}.")


__all__ = ["OfflinePlanner", "find_mentions"]
