"""A realistic retail sales table with a documented data-generating process.

Each row is one SKU's sales in one store on one day. The target ``sales`` (units) is

    sales = store_size[store] * category_demand[category]
            * (price / reference_price[category]) ** -elasticity     # price elasticity 1.6
            * (1.8 if promotion else 1.0)                              # promotion lift +80%
            * (1.25 if holiday else 1.0)                               # holiday lift +25%
            * (1.15 if weekend else 1.0)                               # weekend lift +15%
            * (1 + 0.1 * sin(2 pi * day_of_year / 365))                # mild seasonality
            * (1 + 0.01 * (temperature - 15)  for Sports, Clothing)    # weak weather effect
            * sku_effect[sku]                                          # lognormal, sigma 0.1
            * noise                                                    # lognormal, sigma 0.15

so the strong drivers are, in order, ``product_category`` (demand differs 12-fold across
categories), ``promotion``, ``price`` and ``store_id`` (store sizes differ up to 4-fold);
``holiday`` and the day of week matter less; ``temperature`` barely; ``region`` only
through the store (it is a function of ``store_id``); ``sku`` adds a small effect.
Prices are drawn around each category's reference price independently of promotions.
About 3% of ``temperature``, 2% of ``price`` and 1% of ``region`` are missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

SALES_TRUE_DRIVERS = ("product_category", "promotion", "price", "store_id")
SALES_NOISE_COLUMNS = ("temperature", "region", "sku")

_CATEGORIES = {  # name: (demand, reference price)
    "Grocery": (60.0, 4.0),
    "Household": (30.0, 9.0),
    "Clothing": (18.0, 35.0),
    "Sports": (12.0, 45.0),
    "Toys": (10.0, 25.0),
    "Electronics": (5.0, 180.0),
}
_REGIONS = ("North", "South", "East", "West")
_REGION_TEMPERATURE = {"North": -4.0, "South": 6.0, "East": 0.0, "West": 2.0}
_ELASTICITY = 1.6
_N_STORES = 40
_N_SKUS = 1500


def make_sales(rows: int = 10_000, seed: int = 7) -> pd.DataFrame:
    """Generate ``rows`` rows of the sales table (deterministic for a given seed)."""
    import numpy as np
    import pandas as pd

    if rows < 1:
        raise ValueError("rows must be at least 1")
    rng = np.random.default_rng(seed)

    store_size = rng.uniform(0.5, 2.0, _N_STORES)
    store_region = rng.choice(len(_REGIONS), _N_STORES)
    cat_names = list(_CATEGORIES)
    sku_category = rng.choice(len(cat_names), _N_SKUS)
    sku_effect = rng.lognormal(0.0, 0.1, _N_SKUS)
    sku_price_factor = rng.uniform(0.8, 1.25, _N_SKUS)
    demand = np.array([_CATEGORIES[c][0] for c in cat_names])
    ref_price = np.array([_CATEGORIES[c][1] for c in cat_names])

    start = np.datetime64("2023-01-01")
    day = rng.integers(0, 2 * 365, rows)
    dates = start + day.astype("timedelta64[D]")
    dates_index = pd.DatetimeIndex(dates)
    day_of_year = dates_index.dayofyear.to_numpy()
    weekend = dates_index.dayofweek.to_numpy() >= 5
    # Fixed-date holidays plus a few random ones, the same for every store.
    holiday_days = set(rng.choice(2 * 365, 18, replace=False).tolist())
    for year_offset in (0, 365):
        holiday_days.update(d + year_offset for d in (0, 358, 359, 184, 314))
    holiday = np.isin(day, list(holiday_days))

    store = rng.integers(0, _N_STORES, rows)
    sku = rng.integers(0, _N_SKUS, rows)
    cat = sku_category[sku]
    region = store_region[store]
    price = ref_price[cat] * sku_price_factor[sku] * rng.lognormal(0.0, 0.12, rows)
    promotion = rng.random(rows) < 0.2
    season = 10 * np.sin(2 * np.pi * (day_of_year - 100) / 365)
    temperature = 12 + season + np.array([_REGION_TEMPERATURE[r] for r in _REGIONS])[region]
    temperature = temperature + rng.normal(0, 3, rows)

    weather_sensitive = np.isin(cat, [cat_names.index("Sports"), cat_names.index("Clothing")])
    sales = (
        store_size[store]
        * demand[cat]
        * (price / ref_price[cat]) ** -_ELASTICITY
        * np.where(promotion, 1.8, 1.0)
        * np.where(holiday, 1.25, 1.0)
        * np.where(weekend, 1.15, 1.0)
        * (1 + 0.1 * np.sin(2 * np.pi * day_of_year / 365))
        * np.where(weather_sensitive, 1 + 0.01 * (temperature - 15), 1.0)
        * sku_effect[sku]
        * rng.lognormal(0.0, 0.15, rows)
    )

    frame = pd.DataFrame(
        {
            "date": dates_index.strftime("%Y-%m-%d"),
            "store_id": [f"S{i:03d}" for i in store],
            "region": np.array(_REGIONS, dtype=object)[region],
            "product_category": np.array(cat_names, dtype=object)[cat],
            "sku": [f"SKU-{i:05d}" for i in sku],
            "price": np.round(price, 2),
            "promotion": promotion.astype(int),
            "holiday": holiday.astype(int),
            "temperature": np.round(temperature, 1),
            "sales": np.round(sales, 1),
        }
    )
    _punch_holes(frame, rng, {"temperature": 0.03, "price": 0.02, "region": 0.01})
    return frame


def _punch_holes(frame: pd.DataFrame, rng: np.random.Generator, rates: dict[str, float]) -> None:
    for column, rate in rates.items():
        frame[column] = frame[column].mask(rng.random(len(frame)) < rate)


def write_table(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write by extension: .csv (default), .parquet, .jsonl / .json."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        frame.to_parquet(path, index=False)
    elif suffix in (".jsonl", ".json"):
        frame.to_json(path, orient="records", lines=True, force_ascii=False)
    else:
        frame.to_csv(path, index=False)
    return path
