"""Sample data sets that mlpilot generates itself (no downloads)."""

from __future__ import annotations

from mlpilot.platform.datasets.sales import (
    SALES_NOISE_COLUMNS,
    SALES_TRUE_DRIVERS,
    make_sales,
    write_table,
)

__all__ = ["SALES_NOISE_COLUMNS", "SALES_TRUE_DRIVERS", "make_sales", "write_table"]
