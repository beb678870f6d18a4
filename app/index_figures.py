"""The index walk as a picture (plotly, no streamlit): a key's hash slot in every index file, the chain
of entries it leads to with their prevIndex arrows, and which hop is the real match and which are
hash collisions.

One column per index file, newest on the left (the order `IndexService.queryOffset` visits them). The
top row is the slot (RocketMQ's `IndexFile` slot table: 4 bytes holding the newest entry number); each
row below is one hop, linked to the next by the entry's prevIndex field (`IndexFile.putKey` writes the
slot's previous value there). A dashed arrow leads from a file's last hop to the same slot in the next,
older file.
"""

from __future__ import annotations

import plotly.graph_objects as go

VERDICT_STYLE = {   # verdict prefix -> (legend name, colour, symbol)
    "match": ("real match", "#2ca02c", "circle"),
    "hash collision": ("hash collision (same hash, other key)", "#d62728", "x"),
    "hash matches; record": ("hash matches, record gone", "#ff7f0e", "circle-open"),
    "other key": ("other key in the slot", "#9e9e9e", "circle"),
}
COLOR_SLOT = "#4c78a8"
MAX_HOPS_DRAWN_PER_FILE = 30
MAX_HEIGHT_PX = 760
WIDE_LABELS_UP_TO_FILES = 3       # beyond this many columns a hop is labelled by its entry number only


def _style(verdict: str) -> tuple[str, str, str]:
    for prefix, style in VERDICT_STYLE.items():
        if verdict.startswith(prefix):
            return style
    return VERDICT_STYLE["other key"]


def _arrow(fig: go.Figure, start: tuple[float, float], end: tuple[float, float], *, color: str,
           dash: bool = False) -> None:
    fig.add_annotation(x=end[0], y=end[1], ax=start[0], ay=start[1], xref="x", yref="y", axref="x",
                       ayref="y", showarrow=True, arrowhead=2, arrowsize=1.2, arrowwidth=1.5,
                       arrowcolor=color, standoff=9, startstandoff=9, text="",
                       opacity=0.35 if dash else 1.0)


def chain_walk_figure(walk) -> go.Figure:
    """Slots, chain entries and prevIndex arrows of an `app.index_data.KeyWalk`, across its files."""
    fig = go.Figure()
    files = list(walk.files) or sorted(set(walk.steps["file"]) if not walk.steps.empty else [],
                                       reverse=True)
    steps = walk.steps
    deepest = 0
    truncated = False
    legend_seen: set[str] = set()
    previous_tail = None
    for column, file_name in enumerate(files):
        hops = steps[steps["file"] == file_name] if not steps.empty else steps
        if len(hops) > MAX_HOPS_DRAWN_PER_FILE:
            hops, truncated = hops.iloc[:MAX_HOPS_DRAWN_PER_FILE], True
        first_entry = int(hops.iloc[0]["entry"]) if len(hops) else 0
        fig.add_trace(go.Scatter(
            x=[column], y=[0], mode="markers+text", showlegend=column == 0, name="hash slot",
            marker=dict(symbol="square", size=26, color=COLOR_SLOT),
            text=["" if len(hops) else "empty"],
            textposition="middle right", textfont=dict(size=11),
            hovertemplate=f"{file_name}<br>slot {walk.slot} holds entry {first_entry}<extra></extra>"))
        if previous_tail is not None:
            _arrow(fig, previous_tail, (column, 0), color="#777777", dash=True)
        tail = (column, 0)
        for row_number, (_, hop) in enumerate(hops.iterrows(), start=1):
            name, color, symbol = _style(str(hop["verdict"]))
            fig.add_trace(go.Scatter(
                x=[column], y=[row_number], mode="markers+text", name=name,
                showlegend=name not in legend_seen, legendgroup=name,
                marker=dict(symbol=symbol, size=16, color=color, line=dict(width=2, color=color)),
                text=[f"#{int(hop['entry'])}" + (f" (prevIndex {int(hop['prev_entry'])})"
                                                 if len(files) <= WIDE_LABELS_UP_TO_FILES else "")],
                textposition="middle right",
                hovertemplate=(f"{file_name} entry {int(hop['entry'])}<br>keyHash {int(hop['key_hash'])}"
                               f"<br>phy_offset {int(hop['phy_offset']):,}<br>{hop['store_time']}"
                               f"<br>prevIndex {int(hop['prev_entry'])}<br>{hop['verdict']}"
                               "<extra></extra>")))
            legend_seen.add(name)
            _arrow(fig, tail, (column, row_number), color=COLOR_SLOT if row_number == 1 else "#555555")
            tail = (column, row_number)
            deepest = max(deepest, row_number)
        previous_tail = tail
    labels = [f"{name[:8]}<br>{name[8:]}" if len(name) > 12 else name for name in files]
    title = (f"Index walk of {walk.key_string!r}: slot {walk.slot} in {len(files)} file(s), "
             f"{len(steps)} hop(s), {int((steps['verdict'] == 'match').sum()) if not steps.empty else 0}"
             f" match(es), {walk.collisions} collision(s)")
    if truncated:
        title += f"<br><sup>first {MAX_HOPS_DRAWN_PER_FILE} hops per file drawn; the table has all</sup>"
    fig.update_layout(
        title=dict(text=title, x=0, xanchor="left"),
        height=min(MAX_HEIGHT_PX, 230 + 48 * (deepest + 1)),
        margin=dict(l=60, r=20, t=70, b=110),
        xaxis=dict(tickmode="array", tickvals=list(range(len(files))), ticktext=labels,
                   range=[-0.5, max(len(files), 1) - 0.3], title="index file (newest left)",
                   showgrid=False, zeroline=False),
        yaxis=dict(autorange="reversed", tickmode="array", tickvals=list(range(deepest + 1)),
                   ticktext=[f"slot {walk.slot}"] + [f"hop {n}" for n in range(1, deepest + 1)],
                   showgrid=False,
                   zeroline=False),
        legend=dict(orientation="h", yanchor="top", y=-0.3, xanchor="left", x=0),
        plot_bgcolor="white")
    return fig
