"""The sample dataset the SQL tools read: a small, deterministic sales database in SQLite.

Built on first use into the data folder (AGENTUI_DATA_DIR, runs.conf; default .local/data) from a
fixed seed, so every install has the same numbers and demo answers can quote them. The file is
written under a temporary name and renamed into place, so concurrent first uses are safe.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import sqlite3
import threading
from pathlib import Path

from django.conf import settings

from runs.conf import conf

DATASET_VERSION = 1
SEED = 20_241
FILENAME = f"sample-sales-v{DATASET_VERSION}.sqlite3"

CITIES = [
    ("Lisbon", "Portugal", "Europe", 545_000),
    ("Porto", "Portugal", "Europe", 232_000),
    ("Lyon", "France", "Europe", 522_000),
    ("Nantes", "France", "Europe", 320_000),
    ("Leipzig", "Germany", "Europe", 616_000),
    ("Bremen", "Germany", "Europe", 569_000),
    ("Osaka", "Japan", "Asia", 2_750_000),
    ("Sapporo", "Japan", "Asia", 1_960_000),
    ("Austin", "United States", "Americas", 975_000),
    ("Denver", "United States", "Americas", 716_000),
    ("Curitiba", "Brazil", "Americas", 1_770_000),
    ("Perth", "Australia", "Oceania", 2_140_000),
]
PRODUCTS = [
    ("Espresso beans 1kg", "coffee", 24.50),
    ("Filter beans 1kg", "coffee", 21.00),
    ("Green tea 200g", "tea", 9.75),
    ("Black tea 500g", "tea", 12.40),
    ("Ceramic mug", "kitchen", 8.90),
    ("French press", "kitchen", 34.00),
    ("Hand grinder", "kitchen", 59.00),
    ("Oat milk 1l", "dairy-free", 2.30),
    ("Dark chocolate 100g", "snacks", 3.60),
    ("Almond biscuits", "snacks", 4.80),
]
SALES_PER_CITY = 160
FIRST_DAY = dt.date(2023, 1, 1)
DAYS = 730  # 2023 and 2024

SCHEMA = """
CREATE TABLE cities (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    country TEXT NOT NULL,
    region TEXT NOT NULL,
    population INTEGER NOT NULL
);
CREATE TABLE products (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    category TEXT NOT NULL,
    unit_price REAL NOT NULL
);
CREATE TABLE sales (
    id INTEGER PRIMARY KEY,
    sold_on TEXT NOT NULL,          -- ISO date, 2023-01-01 .. 2024-12-30
    city_id INTEGER NOT NULL REFERENCES cities(id),
    product_id INTEGER NOT NULL REFERENCES products(id),
    quantity INTEGER NOT NULL,
    revenue REAL NOT NULL           -- quantity * unit_price
);
CREATE INDEX sales_city ON sales(city_id);
CREATE INDEX sales_product ON sales(product_id);
CREATE INDEX sales_day ON sales(sold_on);
"""

_lock = threading.Lock()


def data_dir() -> Path:
    configured = conf().data_dir
    return (
        Path(configured) if configured else Path(settings.BASE_DIR) / ".local" / "data"
    )


def _fill(connection: sqlite3.Connection) -> None:
    rng = random.Random(SEED)
    connection.executescript(SCHEMA)
    connection.executemany(
        "INSERT INTO cities (id, name, country, region, population) VALUES (?, ?, ?, ?, ?)",
        [(i, *city) for i, city in enumerate(CITIES, start=1)],
    )
    connection.executemany(
        "INSERT INTO products (id, name, category, unit_price) VALUES (?, ?, ?, ?)",
        [(i, *product) for i, product in enumerate(PRODUCTS, start=1)],
    )
    rows = []
    for city_id in range(1, len(CITIES) + 1):
        for _ in range(SALES_PER_CITY):
            product_id = rng.randint(1, len(PRODUCTS))
            quantity = rng.randint(1, 12)
            day = FIRST_DAY + dt.timedelta(days=rng.randrange(DAYS))
            revenue = round(quantity * PRODUCTS[product_id - 1][2], 2)
            rows.append((day.isoformat(), city_id, product_id, quantity, revenue))
    rows.sort()  # ids in date order read naturally
    connection.executemany(
        "INSERT INTO sales (sold_on, city_id, product_id, quantity, revenue) VALUES (?, ?, ?, ?, ?)",
        rows,
    )


def ensure_sample_db() -> Path:
    """The sample database's path, building it first if it is missing."""
    path = data_dir() / FILENAME
    if path.exists():
        return path
    with _lock:
        if path.exists():
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.unlink(missing_ok=True)
        connection = sqlite3.connect(tmp)
        try:
            with connection:
                _fill(connection)
        finally:
            connection.close()
        os.replace(tmp, path)  # atomic: readers see no file or a whole one
    return path
