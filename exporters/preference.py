"""`evalstudio analyze` of pairwise comparisons (`evalstudio.comparisons`): win rates, Bradley-Terry strengths with
bootstrap intervals and on the Elo scale, Chatbot Arena's online Elo, position bias, and agreement between
annotators on preferences; as tables (no IO) and a report folder (CSVs + one HTML page)."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

from ..stats import preference as pref
from ..stats.agreement import krippendorff_alpha

_EXPLAIN = {
    "strengths": "Bradley-Terry strengths (maximum likelihood; a tie is half a win each way), with 95% percentile "
                 "bootstrap intervals over comparisons, and the same on Chatbot Arena's Elo scale "
                 "(400 log10 strength + 1000).",
    "win_rates": "Share of comparisons won, a tie counting half, with Wilson's 95% interval.",
    "elo": "Elo updated comparison by comparison in the file's order (K = 4), as Chatbot Arena's notebook does; it "
           "depends on the order, the Bradley-Terry fit does not.",
    "position": "Whether the output shown first (left) wins more often than chance among decisive judgements "
                "(exact binomial test against 1/2).",
    "agreement": "Agreement between annotators on which system is better (a tie or both bad is one answer), over "
                 "items on which the same pair was judged by two or more annotators: Krippendorff's alpha (nominal) "
                 "and the share of agreeing pairs of judgements.",
}


def preference_agreement(comparisons: pd.DataFrame) -> dict:
    """Alpha (nominal) and pairwise percent agreement on the winner of each (item, pair of systems), over units
    judged two or more times; the position is taken out (the winner is named, whichever side it was on)."""
    pair = np.where(comparisons["left"] < comparisons["right"], comparisons["left"] + " | " + comparisons["right"],
                    comparisons["right"] + " | " + comparisons["left"])
    winner = np.select([comparisons["outcome"] == "left", comparisons["outcome"] == "right"],
                       [comparisons["left"], comparisons["right"]], "tie")
    unit = comparisons["item"].astype(str).to_numpy() + " || " + pair
    sizes = pd.Series(unit).map(pd.Series(unit).value_counts()).to_numpy()
    multi = sizes >= 2
    out = {"units": int(len(set(unit[multi]))), "judgements": int(multi.sum()), "alpha": float("nan"),
           "percent_agreement": float("nan")}
    if out["units"] == 0:
        return out
    out["alpha"] = krippendorff_alpha(unit[multi], winner[multi], "nominal")
    frame = pd.DataFrame({"unit": unit[multi], "winner": winner[multi]})
    counts = frame.groupby(["unit", "winner"]).size()
    per_unit = frame.groupby("unit").size()
    agreeing = (counts * (counts - 1)).groupby(level=0).sum()
    out["percent_agreement"] = float(agreeing.sum() / (per_unit * (per_unit - 1)).sum())
    return out


def analyze_comparisons(comparisons: pd.DataFrame, n_boot: int = 1000) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """(tables by CSV name, notes): what could not be computed is said in the notes and in not_computed.csv."""
    tables, notes = {}, []
    tables["win_rates"] = pref.win_rates(comparisons)
    try:
        tables["bradley_terry"] = pref.bradley_terry(comparisons, n_boot=n_boot)
    except ValueError as e:
        notes.append(f"bradley_terry: {e}")
    tables["elo"] = pref.online_elo(comparisons)
    tables["position_bias"] = pd.DataFrame([pref.position_bias(comparisons)])
    agreement = preference_agreement(comparisons)
    tables["agreement"] = pd.DataFrame([agreement])
    if agreement["units"] == 0:
        notes.append("agreement: no item has the same pair judged by two or more annotators")
    if notes:
        tables["not_computed"] = pd.DataFrame({"table": [n.split(":", 1)[0] for n in notes],
                                               "reason": [n.split(": ", 1)[1] for n in notes]})
    return tables, notes


def _strength_plot(table: pd.DataFrame):
    from .report import plt

    rows = table.sort_values("elo")
    fig, ax = plt.subplots(figsize=(6.5, 0.35 * len(rows) + 1.2))
    y = np.arange(len(rows))
    if "elo_lo" in rows:
        err = np.vstack([rows["elo"] - rows["elo_lo"], rows["elo_hi"] - rows["elo"]])
        ax.errorbar(rows["elo"], y, xerr=np.clip(np.nan_to_num(err), 0, None).tolist(), fmt="o", capsize=3)
    else:
        ax.plot(rows["elo"], y, "o")
    ax.set_yticks(y, rows["system"].astype(str).str[:30], fontsize=8)
    ax.set_xlabel("Bradley-Terry strength on the Elo scale (95% bootstrap interval)", fontsize=8)
    fig.tight_layout()
    return fig


def write_comparison_analysis(tables: dict[str, pd.DataFrame], title: str, out_dir: Path, notes=()) -> Path:
    """CSVs (spreadsheet-safe, private) and index.html with the strengths plot."""
    from .files import write_csv, write_output
    from .report import _img, _page, _table

    out_dir.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        write_csv(table, out_dir / f"{name}.csv")
    esc = html.escape
    body = [f"<h1>{esc(title)}</h1>"] + [f"<p>{esc(n)}</p>" for n in notes]
    if "bradley_terry" in tables:
        body += ["<h2>Strengths</h2>", f"<p>{_EXPLAIN['strengths']}</p>", _img(_strength_plot(tables["bradley_terry"])),
                 _table(tables["bradley_terry"])]
    body += ["<h2>Win rates</h2>", f"<p>{_EXPLAIN['win_rates']}</p>", _table(tables["win_rates"]),
             "<h2>Online Elo</h2>", f"<p>{_EXPLAIN['elo']}</p>", _table(tables["elo"]),
             "<h2>Position bias</h2>", f"<p>{_EXPLAIN['position']}</p>", _table(tables["position_bias"]),
             "<h2>Agreement between annotators</h2>", f"<p>{_EXPLAIN['agreement']}</p>", _table(tables["agreement"])]
    index = out_dir / "index.html"
    write_output(index, _page(title, "\n".join(body)))
    return index
