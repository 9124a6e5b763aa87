"""The built-in domain adapters: finance, medical, retail."""

from __future__ import annotations

from mlpilot.adapters._base import AdapterAdvice, BaseAdapter


class FinanceAdapter(BaseAdapter):
    name = "finance"
    description = "Credit, loans, fraud and churn in financial services: rare positives, post-outcome ledger fields."
    keywords = (
        "loan",
        "credit",
        "default",
        "fraud",
        "bank",
        "borrower",
        "违约",
        "贷款",
        "信用",
        "欺诈",
        "银行",
    )
    column_words = (
        "loan",
        "credit",
        "income",
        "debt",
        "interest",
        "grade",
        "balance",
        "payment",
        "fico",
        "term",
        "emp",
        "annual",
        "transaction",
        "merchant",
        "card",
        "fraud",
        "default",
        "borrower",
        "delinquent",
        "account",
        "mortgage",
        "overdraft",
        "bank",
    )
    leakage_words = (
        "recoveries",
        "recovery",
        "collection",
        "settlement",
        "chargeoff",
        "charged",
        "writeoff",
        "delinquency",
        "outstanding",
    )
    classification_metric = "pr_auc"
    regression_metric = "mae"


class MedicalAdapter(BaseAdapter):
    name = "medical"
    description = "Clinical outcomes: identifiers are never features, post-discharge fields leak, misses cost most."
    keywords = (
        "patient",
        "diagnos",
        "disease",
        "clinical",
        "hospital",
        "diabetes",
        "heart",
        "cancer",
        "病人",
        "患者",
        "疾病",
        "诊断",
        "医院",
        "糖尿病",
        "心脏病",
    )
    column_words = (
        "patient",
        "age",
        "bmi",
        "glucose",
        "insulin",
        "blood",
        "pressure",
        "cholesterol",
        "diagnosis",
        "bp",
        "heart",
        "smoker",
    )
    leakage_words = (
        "discharge",
        "death",
        "deceased",
        "followup",
        "readmitted",
        "outcome2",
        "mortality",
        "autopsy",
    )
    classification_metric = "recall"
    # weighted recall on three classes equals accuracy; the mean of per-class recalls counts
    # a missed rare diagnosis as much as a missed common one
    multiclass_metric = "balanced_accuracy"
    regression_metric = "mae"

    def advise(
        self, columns: list[str], target: str, task: str, n_classes: int | None = None
    ) -> AdapterAdvice:
        base = super().advise(columns, target, task, n_classes)
        notes = {
            "recall": "medical: recall is the default metric (a missed case costs more than "
            "a false alarm)",
            "balanced_accuracy": f"medical: balanced accuracy (the mean recall of the "
            f"{n_classes} classes) is the default metric, so a missed rare class counts as "
            "much as a missed common one",
        }
        note = notes.get(base.metric or "", "") if task == "classification" else ""
        return AdapterAdvice(drop=base.drop, metric=base.metric, notes=(note,) if note else ())


class RetailAdapter(BaseAdapter):
    name = "retail"
    description = (
        "Sales and demand: calendar effects, promotions, stores and SKUs; errors in units (MAE)."
    )
    keywords = (
        "sales",
        "store",
        "sku",
        "demand",
        "promotion",
        "retail",
        "revenue",
        "销售",
        "门店",
        "销量",
        "促销",
        "零售",
    )
    column_words = (
        "sales",
        "store",
        "sku",
        "promotion",
        "promo",
        "holiday",
        "price",
        "category",
        "units",
        "revenue",
        "region",
    )
    leakage_words = ("returns", "refund", "refunded", "margin_realized", "sold_out")
    classification_metric = "f1"
    regression_metric = "mae"


BUILTIN_ADAPTERS: tuple[type[BaseAdapter], ...] = (FinanceAdapter, MedicalAdapter, RetailAdapter)
