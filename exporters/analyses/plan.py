"""`evalstudio plan`: from a pilot's ratings, how many items and annotators a study needs to detect a difference
`delta` between two systems with the power asked for, in the paired and the unpaired design, and what that costs
(evalstudio.stats.power). Tables: components.csv, power.csv, cheapest.csv; index.html with the power curves."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

from evalstudio.base.errors import BadInput

from ...stats.power import POWER, Components, one_way_components, simulated_power

GRID = (5, 10, 15, 20, 25, 30, 40, 50, 60, 80, 100, 120, 150, 200, 250, 300, 400, 500, 600, 800, 1000, 1500, 2000)


def pilot_components(ratings: pd.DataFrame, criterion: str, systems: tuple[str, str]) -> dict[str, Components]:
    """Per design, the variance components of the pilot's ratings of `criterion` for the two systems. Paired: the
    per-annotator differences (second system minus first) of the items both were rated on by one annotator, grouped
    by item. Unpaired: each system's ratings around its mean, grouped by (system, item)."""
    r = ratings[(ratings["criterion"] == criterion) & ratings["system"].isin(systems)]
    r = r.assign(value=r["value"].astype(float))
    wide = r.pivot_table(index=["item", "annotator"], columns="system", values="value", aggfunc="mean")
    out = {}
    if set(systems) <= set(wide.columns):
        both = wide.dropna(subset=list(systems))
        if both.index.get_level_values("item").nunique() >= 2 and len(both) > both.index.get_level_values(
                "item").nunique():
            out["paired"] = one_way_components((both[systems[1]] - both[systems[0]]).to_numpy(),
                                               both.index.get_level_values("item").to_numpy())
    centred = r["value"] - r.groupby("system")["value"].transform("mean")
    groups = r["system"].astype(str) + "\x00" + r["item"].astype(str)
    if groups.nunique() >= 2 and len(r) > groups.nunique():
        out["unpaired"] = one_way_components(centred.to_numpy(), groups.to_numpy(), r["system"].astype(str).to_numpy())
    return out


def plan_tables(ratings: pd.DataFrame, criterion: str, systems: tuple[str, str], delta: float, power: float = 0.8,
                alpha: float = 0.05, annotators=(1, 2, 3, 4, 5), max_items: int = 2000, simulations: int = 1000,
                minutes_per_task: float | None = None, pay_per_hour: float | None = None,
                seed: int = 0) -> dict[str, pd.DataFrame]:
    """components, power (closed form on a grid of item counts), cheapest (per design and number of annotators: the
    fewest items that reach `power`, its cost and its simulated power)."""
    if not delta > 0:
        raise BadInput(f"--delta: the smallest difference worth detecting must be above 0, got {delta}")
    if not 0 < power < 1 or not 0 < alpha < 1:
        raise BadInput("--power and --alpha are probabilities between 0 and 1")
    found = pilot_components(ratings, criterion, systems)
    if not found:
        raise BadInput(f"{criterion}: the pilot has no item rated more than once for {systems[0]} and {systems[1]}; "
                       "variance components need repeated ratings")
    rng = np.random.default_rng(seed)
    m = np.asarray(sorted(set(annotators)), dtype=int)
    every = np.arange(2, max_items + 1)
    grid = np.asarray([k for k in GRID if k <= max_items], dtype=int)
    component_rows, power_rows, cheapest_rows = [], [], []
    for design, c in found.items():
        component_rows.append({"criterion": criterion, "design": design, "between_items": c.between,
                               "within": c.within, "pilot_items": c.groups, "pilot_observations": c.observations})
        curve = POWER[design](delta, c, every, m, alpha)
        for j, annotators_per_item in enumerate(m):
            for k in grid:
                power_rows.append({"criterion": criterion, "design": design, "annotators": annotators_per_item,
                                   "items": k, "power": curve[k - 2, j]})
            reached = np.nonzero(curve[:, j] >= power)[0]
            row = {"criterion": criterion, "design": design, "annotators": annotators_per_item}
            if len(reached) == 0:
                cheapest_rows.append(row | {"items": np.nan, "tasks": np.nan, "power": curve[-1, j],
                                            "simulated_power": np.nan, "minutes": np.nan, "cost": np.nan,
                                            "note": f"not reached with {max_items} items"})
                continue
            k = int(every[reached[0]])
            tasks = 2 * k * int(annotators_per_item)  # each item's output of both systems, by every annotator
            minutes = tasks * minutes_per_task if minutes_per_task is not None else np.nan
            cost = minutes / 60 * pay_per_hour if pay_per_hour is not None and minutes == minutes else np.nan
            cheapest_rows.append(row | {
                "items": k, "tasks": tasks, "power": curve[k - 2, j],
                "simulated_power": simulated_power(delta, c, k, int(annotators_per_item), design, simulations, rng,
                                                   alpha),
                "minutes": minutes, "cost": cost, "note": "" if design == "paired" else "items per system"})
    cheapest = pd.DataFrame(cheapest_rows)
    return {"components": pd.DataFrame(component_rows), "power": pd.DataFrame(power_rows), "cheapest": cheapest}


def best_design(cheapest: pd.DataFrame) -> pd.Series | None:
    """The design with the fewest tasks (then the fewest annotators per item) that reaches the power."""
    reached = cheapest.dropna(subset=["tasks"])
    if reached.empty:
        return None
    return reached.sort_values(["tasks", "annotators"]).iloc[0]


def write_plan(tables: dict[str, pd.DataFrame], title: str, out_dir: Path, notes: list[str], target: float | None,
               widths: dict[str, float] | None = None) -> Path:
    """The CSVs (spreadsheet-safe) and index.html: the power curves (a power target), the width curves (an
    interval-width target: `widths` maps agreement / correlation to the width asked for)."""
    from evalstudio.base.files import write_output

    from ..tables.files import write_csv
    from .report import html_image, html_page, html_table, plt

    out_dir.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        write_csv(table, out_dir / f"{name}.csv")
    body = [f"<h1>{html.escape(title)}</h1>"] + [f"<p>{html.escape(n)}</p>" for n in notes]
    if "components" in tables:
        designs = list(tables["components"]["design"])
        fig, axes = plt.subplots(1, len(designs), figsize=(5.5 * len(designs), 4), squeeze=False)
        for ax, design in zip(axes[0], designs):
            curves = tables["power"][tables["power"]["design"] == design]
            for m, g in curves.groupby("annotators"):
                ax.plot(g["items"], g["power"], marker="o", markersize=3, label=f"{m} annotator(s) per item")
            _log_items(ax)
            ax.set_ylim(0, 1.02)
            ax.axhline(target, color="grey", linestyle="--", linewidth=0.8)
            ax.set_xlabel("items" + (" per system" if design == "unpaired" else ""))
            ax.set_ylabel("power")
            ax.set_title(design)
            ax.legend(fontsize=7)
        fig.tight_layout()
        body += ["<h2>Cheapest design per number of annotators</h2>", html_table(tables["cheapest"]),
                 "<h2>Power against items</h2>", html_image(fig), "<h2>Variance components of the pilot</h2>",
                 html_table(tables["components"])]
        plt.close(fig)
    shown = [kind for kind in ("agreement", "correlation") if kind in tables]
    if shown:
        fig, axes = plt.subplots(1, len(shown), figsize=(5.5 * len(shown), 4), squeeze=False)
        labels = {"agreement": "width of alpha's 95% interval", "correlation": "width of r's 95% interval"}
        for ax, kind in zip(axes[0], shown):
            for m, g in tables[kind].dropna(subset=["width"]).groupby("annotators"):
                ax.plot(g["outputs"], g["width"], marker="o", markersize=3, label=f"{m} annotator(s) per output")
            _log_items(ax)
            ax.axhline((widths or {}).get(kind, np.nan), color="grey", linestyle="--", linewidth=0.8)
            ax.set_xlabel("outputs rated")
            ax.set_ylabel(labels[kind])
            ax.set_title(kind)
            ax.legend(fontsize=7)
        fig.tight_layout()
        body += ["<h2>Cheapest design per interval target and number of annotators</h2>",
                 html_table(tables["precision_cheapest"]), "<h2>Interval width against outputs</h2>", html_image(fig),
                 "<h2>The pilot's agreement and correlation</h2>", html_table(tables["precision"])]
        plt.close(fig)
    index = out_dir / "index.html"
    write_output(index, html_page(title, "\n".join(body)))
    return index


def _log_items(ax) -> None:
    """A log axis of counts with plain numbers: the report turns mathtext off (a $ in a system name is text), so
    matplotlib's default labels (10^1 in mathtext) would show as their source."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def calibration(ratings: pd.DataFrame, criterion: str, systems: tuple[str, str], annotators=(1, 2, 3),
                power: float = 0.8, alpha: float = 0.05, simulations: int = 2000, pilots: int = 50,
                pilot_items: int = 20, seed: int = 0) -> pd.DataFrame:
    """Planned against realised power on published ratings (the items are the population, the full data's mean
    difference the effect to detect). Per design and annotators per item: the items the full data's components
    plan for, the power planned there, the power realised by `simulations` studies of that size drawn from the
    data (evalstudio.stats.power.realised_power), and the power that plans from `pilots` pilots of `pilot_items`
    random items would have promised for the same size (mean and standard deviation)."""
    from ...stats.power import realised_power

    rng = np.random.default_rng(seed)
    r = ratings[(ratings["criterion"] == criterion) & ratings["system"].isin(systems)]
    r = r.assign(value=r["value"].astype(float))
    wide = r.pivot_table(index=["item", "annotator"], columns="system", values="value").dropna(subset=list(systems))
    differences = wide[systems[1]] - wide[systems[0]]
    delta = float(differences.groupby(level="item").mean().mean())
    if delta < 0:  # the second system is the lower one: the same test, the other way round
        differences, systems, delta = -differences, systems[::-1], -delta
    per_item = {"paired": [g.to_numpy() for _, g in differences.groupby(level="item")]}
    first, second = ([g.to_numpy() for _, g in r[r["system"] == s].groupby("item")["value"]] for s in systems)
    items = sorted(set(r["item"]))
    full = pilot_components(r, criterion, systems)
    rows = []
    for design, c in full.items():
        curve = POWER[design](delta, c, np.arange(2, 5001), annotators, alpha)
        for j, m in enumerate(annotators):
            k = int(np.argmax(curve[:, j] >= power)) + 2
            realised = realised_power(per_item["paired"] if design == "paired" else first, k, m, design, simulations,
                                      rng, alpha, None if design == "paired" else second)
            promised = []
            for _ in range(pilots):
                chosen = set(rng.choice(items, size=min(pilot_items, len(items)), replace=False))
                pilot = pilot_components(r[r["item"].isin(chosen)], criterion, systems).get(design)
                if pilot is not None:
                    promised.append(float(POWER[design](delta, pilot, [k], [m], alpha)[0, 0]))
            rows.append({"criterion": criterion, "systems": f"{systems[1]} - {systems[0]}", "delta": delta,
                         "design": design, "annotators": m, "items": k, "planned": float(curve[k - 2, j]),
                         "realised": realised, "pilot_planned_mean": float(np.mean(promised)),
                         "pilot_planned_sd": float(np.std(promised))})
    return pd.DataFrame(rows)
