"""Utilities for loading, validating and summarising CSV sales reports.

The functions here are deliberately small so they can be reused from
command-line scripts as well as from the web dashboard.
"""

from __future__ import annotations

import csv
import logging
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Iterable, Iterator, Optional

log = logging.getLogger(__name__)

DATE_FORMATS = ("%Y-%m-%d", "%d/%m/%Y", "%m-%d-%Y")
SKU_PATTERN = re.compile(r"^[A-Z]{3}-\d{4}(?:-[A-Z0-9]{2})?$")


class ReportError(Exception):
    """Raised when a report row cannot be interpreted."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


@dataclass(frozen=True)
class Sale:
    """A single line of a sales report."""

    sku: str
    quantity: int
    unit_price: float
    sold_on: date
    region: str = "unknown"
    tags: tuple[str, ...] = field(default_factory=tuple)

    @property
    def total(self) -> float:
        return round(self.quantity * self.unit_price, 2)


def parse_date(raw: str) -> date:
    """Parse a date written in any of the accepted formats."""
    raw = raw.strip()
    for fmt in DATE_FORMATS:
        try:
            return datetime.strptime(raw, fmt).date()
        except ValueError:
            continue
    raise ValueError(f"unrecognised date {raw!r}")


def parse_row(line: int, row: dict[str, str]) -> Sale:
    sku = row.get("sku", "").strip().upper()
    if not SKU_PATTERN.match(sku):
        raise ReportError(line, f"bad SKU {sku!r}")
    try:
        quantity = int(row["quantity"])
        price = float(row["unit_price"].replace(",", "."))
    except (KeyError, ValueError) as exc:
        raise ReportError(line, "missing or malformed number") from exc
    if quantity < 0:
        raise ReportError(line, 'negative quantity; use the "returns" sheet')
    tags = tuple(t for t in row.get("tags", "").split(";") if t)
    return Sale(
        sku=sku,
        quantity=quantity,
        unit_price=price,
        sold_on=parse_date(row["date"]),
        region=row.get("region") or "unknown",
        tags=tags,
    )


def read_sales(path: Path, *, strict: bool = False) -> Iterator[Sale]:
    """Yield every valid sale in *path*.

    With ``strict=True`` the first bad row aborts the whole read;
    otherwise bad rows are logged and skipped.
    """
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        for number, row in enumerate(reader, start=2):
            try:
                yield parse_row(number, row)
            except ReportError as err:
                if strict:
                    raise
                log.warning("skipping %s: %s", path.name, err)


class Summary:
    """Aggregates sales by region and by month."""

    def __init__(self) -> None:
        self.by_region: dict[str, float] = defaultdict(float)
        self.by_month: dict[str, float] = defaultdict(float)
        self.count = 0

    def add(self, sale: Sale) -> None:
        self.count += 1
        self.by_region[sale.region] += sale.total
        self.by_month[sale.sold_on.strftime("%Y-%m")] += sale.total

    def extend(self, sales: Iterable[Sale]) -> "Summary":
        for sale in sales:
            self.add(sale)
        return self

    @property
    def grand_total(self) -> float:
        return sum(self.by_region.values())

    def top_regions(self, n: int = 3) -> list[tuple[str, float]]:
        ranked = sorted(self.by_region.items(), key=lambda kv: kv[1], reverse=True)
        return ranked[:n]

    def render(self, title: Optional[str] = None) -> str:
        lines = [title or "Sales summary", "=" * 40]
        for region, amount in self.top_regions(5):
            lines.append(f"{region:<20}{amount:>12,.2f}")
        lines.append("-" * 40)
        lines.append(f"{'TOTAL':<20}{self.grand_total:>12,.2f}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Summary count={self.count} total={self.grand_total:.2f}>"


def summarise_directory(folder: Path, pattern: str = "*.csv") -> Summary:
    summary = Summary()
    files = sorted(folder.glob(pattern))
    if not files:
        log.info("no reports found in %s", folder)
    for path in files:
        # Archived reports are kept for auditing only.
        if path.stem.endswith("_archived"):
            continue
        summary.extend(read_sales(path))
    return summary


def main(argv: Optional[list[str]] = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    summary = summarise_directory(args.folder)
    print(summary.render(args.title))
    return 0 if summary.count else 1


if __name__ == "__main__":
    raise SystemExit(main())
