"""Figures the Tour teaches with (plotly, no streamlit): a record's bytes coloured by field, and
consume-queue units pointing into the commit log. The segment, pointer and index pictures come from
`app.segment_figures` and `app.index_figures`, the same ones the Overview and the Index page use."""

from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go

from app.hexview import BYTES_PER_ROW, Field

FIELD_PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#eeca3b", "#b279a2",
                 "#ff9da6", "#9d755d", "#bab0ac")
COLOR_UNIT = "#54a24b"
COLOR_RECORD = "#4c78a8"
MAX_GRID_BYTES = 1024


def record_bytes_figure(raw: bytes, fields: Sequence[Field], phy_offset: int) -> go.Figure:
    """The record's bytes, 16 a row, each cell its hex value and coloured by the field it belongs to
    (hover: position, field, decoded value). The first MAX_GRID_BYTES bytes are drawn."""
    shown = raw[:MAX_GRID_BYTES]
    rows = max(1, math.ceil(len(shown) / BYTES_PER_ROW))
    owner = [-1] * len(shown)
    for index, field in enumerate(fields):
        for position in range(field.position, min(field.position + field.size, len(shown))):
            owner[position] = index
    z, text, hover = [], [], []
    for row in range(rows):
        z_row, text_row, hover_row = [], [], []
        for column in range(BYTES_PER_ROW):
            position = row * BYTES_PER_ROW + column
            if position >= len(shown):
                z_row.append(None)
                text_row.append("")
                hover_row.append("")
                continue
            index = owner[position]
            field = fields[index] if index >= 0 else None
            z_row.append(index % len(FIELD_PALETTE) if index >= 0 else None)
            text_row.append(f"{shown[position]:02X}")
            hover_row.append(f"phy_offset {phy_offset + position:,} (position {position})<br>"
                             + (f"{field.number}. {field.name} = {field.value[:60]}" if field else ""))
        z.append(z_row)
        text.append(text_row)
        hover.append(hover_row)
    steps = len(FIELD_PALETTE)
    colorscale = []
    for number, color in enumerate(FIELD_PALETTE):
        colorscale += [[number / steps, color], [(number + 1) / steps, color]]
    fig = go.Figure(go.Heatmap(z=z, text=text, customdata=hover, texttemplate="%{text}",
                               textfont=dict(size=11, color="white"), colorscale=colorscale, zmin=0,
                               zmax=steps, showscale=False, xgap=2, ygap=14,
                               hovertemplate="%{customdata}<extra></extra>"))
    # Each field's name at its first byte, so the colours read without hovering.
    for index, field in enumerate(fields):
        if field.position < len(shown):
            # In the gap above the field's first byte (the rows are spaced for it).
            fig.add_annotation(x=field.position % BYTES_PER_ROW - 0.47,
                               y=field.position // BYTES_PER_ROW - 0.5, text=field.name,
                               showarrow=False, xanchor="left", yanchor="bottom", yshift=-13,
                               font=dict(size=9, color="#222222"))
    fig.update_layout(
        title=dict(text=f"The record at phy_offset {phy_offset:,}: {len(raw)} bytes, 16 a row, "
                        "coloured by field", x=0, xanchor="left"),
        height=90 + 40 * rows, margin=dict(l=70, r=10, t=50, b=30),
        xaxis=dict(side="bottom", tickmode="array", tickvals=list(range(BYTES_PER_ROW)),
                   ticktext=[f"+{n:X}" for n in range(BYTES_PER_ROW)], showgrid=False),
        yaxis=dict(autorange="reversed", tickmode="array", tickvals=list(range(rows)),
                   ticktext=[f"{phy_offset + r * BYTES_PER_ROW:,}" for r in range(rows)],
                   showgrid=False))
    return fig


def queue_to_log_figure(units: Sequence[tuple[int, int, int, int]], log_end: int,
                        queue_label: str) -> go.Figure:
    """Consume-queue units (queue_offset, phy_offset, size, tags_code) as 20-byte boxes on top, the
    commit log's records they point to below (x = physical offset), an arrow from each unit to the
    start of its record."""
    fig = go.Figure()
    width = max(1, log_end) * 1.05
    slot = width / max(4, len(units))
    for number, (queue_offset, phy_offset, size, tags_code) in enumerate(units):
        left = number * slot
        fig.add_shape(type="rect", x0=left + slot * 0.05, x1=left + slot * 0.95, y0=1.55, y1=2.45,
                      fillcolor=COLOR_UNIT, line=dict(color="white"))
        fig.add_annotation(x=left + slot / 2, y=2.0, showarrow=False, font=dict(color="white", size=11),
                           text=f"unit {queue_offset} (20 bytes)<br>phy_offset {phy_offset:,} · "
                                f"size {size}<br>tagsCode {tags_code}")
        fig.add_shape(type="rect", x0=phy_offset, x1=phy_offset + size, y0=-0.4, y1=0.4,
                      fillcolor=COLOR_RECORD, line=dict(color="white"))
        fig.add_annotation(x=phy_offset, y=0.4, ax=left + slot / 2, ay=1.6, xref="x", yref="y",
                           axref="x", ayref="y", showarrow=True, arrowhead=2, arrowwidth=2,
                           arrowcolor="#333333", text="")
        fig.add_annotation(x=phy_offset + size / 2, y=-0.65, showarrow=False, font=dict(size=10),
                           text=f"record {phy_offset:,} .. {phy_offset + size:,}")
    fig.add_trace(go.Scatter(x=[0, width], y=[-1, 2.6], mode="markers", marker=dict(opacity=0),
                             hoverinfo="skip", showlegend=False))
    fig.update_layout(
        title=dict(text=f"{queue_label}: each 20-byte unit points into the commit log", x=0,
                   xanchor="left"),
        height=280, margin=dict(l=110, r=20, t=50, b=40), plot_bgcolor="white",
        xaxis=dict(title="commit log physical offset (bytes)", range=[-width * 0.02, width],
                   tickformat=",d", showgrid=False),
        yaxis=dict(tickmode="array", tickvals=[0, 2], ticktext=["commit log", "consume queue"],
                   range=[-1, 2.7], showgrid=False, zeroline=False, fixedrange=True))
    return fig
