"""Plotly figure builders: plain functions from data to `go.Figure` (no streamlit; tested alone).

The commit log's segments and pointers (Overview, Recovery lab) are drawn by `app.segment_figures`,
the index walk by `app.index_figures`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

COLOR_DATA = "#4c78a8"
COLOR_FILLER = "#f58518"
COLOR_FREE = "#e5e5e5"


def _layout(fig: go.Figure, title: str, height: int = 320) -> go.Figure:
    fig.update_layout(title=title, height=height, margin=dict(l=40, r=20, t=50, b=40),
                      legend=dict(orientation="h", y=-0.2))
    return fig


def segment_fill_figure(segments: Sequence) -> go.Figure:
    """Fill level per segment in percent: records, BLANK filler, free. The x axis is the segment's
    number in the log (its file name in the hover), so a thousand files stay readable."""
    numbers = list(range(len(segments)))
    fig = go.Figure()
    for label, color, part in (("records", COLOR_DATA, lambda s: s.data_bytes),
                               ("BLANK filler", COLOR_FILLER, lambda s: s.filler_bytes),
                               ("free", COLOR_FREE,
                                lambda s: s.size_bytes - s.data_bytes - s.filler_bytes)):
        fig.add_trace(go.Bar(x=numbers, y=[100.0 * part(s) / s.size_bytes for s in segments],
                             name=label, marker=dict(color=color, line=dict(width=0)),
                             customdata=[[s.name, part(s)] for s in segments],
                             hovertemplate="#%{x}: %{customdata[0]}<br>%{y:.1f}% "
                                           "(%{customdata[1]:,} bytes)<extra>" + label + "</extra>"))
    fig.update_layout(barmode="stack", bargap=0.1 if len(segments) < 100 else 0,
                      yaxis_title="% of segment",
                      xaxis=dict(title="segment number (oldest left; file name in the hover)",
                                 tickformat=",d", rangemode="tozero"))
    _layout(fig, f"Segment fill level: {len(segments):,} file(s)")
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1))
    return fig


def nice_step(rough: float) -> float:
    """The 1, 2 or 5 times a power of ten nearest above `rough` (> 0): a readable tick spacing."""
    power = 10.0 ** np.floor(np.log10(rough))
    for factor in (1, 2, 5, 10):
        if factor * power >= rough:
            return float(factor * power)
    return float(10 * power)


def rates_figure(rates: pd.DataFrame) -> go.Figure:
    """Put rate (messages/s and bytes/s) and dispatch backlog over time."""
    fig = go.Figure()
    if not rates.empty:
        fig.add_trace(go.Scatter(x=rates["time"], y=rates["put_messages_per_s"], name="put msgs/s",
                                 mode="lines"))
        fig.add_trace(go.Scatter(x=rates["time"], y=rates["put_kib_per_s"], name="put KiB/s",
                                 mode="lines"))
        fig.add_trace(go.Scatter(x=rates["time"], y=rates["dispatch_kib_per_s"],
                                 name="dispatch KiB/s", mode="lines"))
        fig.add_trace(go.Scatter(x=rates["time"], y=rates["backlog_kib"], name="backlog KiB",
                                 mode="lines", yaxis="y2", line=dict(dash="dot")))
    backlog_max = float(rates["backlog_kib"].max()) if not rates.empty else 0.0
    # Both axes start at zero so "no backlog" sits on the rate axis' zero line.
    fig.update_layout(yaxis=dict(title="rate", rangemode="tozero"),
                      yaxis2=dict(title="backlog KiB", overlaying="y", side="right",
                                  range=[0, max(1.0, backlog_max * 1.15)], showgrid=False,
                                  tickmode="linear", tick0=0,
                                  dtick=nice_step(max(1.0, backlog_max * 1.15) / 4)))
    return _layout(fig, "Put and dispatch rates")


def lag_figure(lag: pd.DataFrame) -> go.Figure:
    """Consumer lag (messages behind) per group, one bar per topic/queue."""
    fig = go.Figure()
    if not lag.empty:
        for group, rows in lag.groupby("group", sort=True):
            fig.add_trace(go.Bar(x=rows["topic"] + " / " + rows["queue_id"].astype(str),
                                 y=rows["lag"], name=str(group)))
    fig.update_layout(barmode="group", yaxis_title="messages behind", xaxis_title="topic / queue")
    return _layout(fig, "Consumer lag per group")


def queue_depth_figure(queues: pd.DataFrame) -> go.Figure:
    """Depth (max - min offset) of every queue."""
    fig = go.Figure()
    if not queues.empty:
        fig.add_trace(go.Bar(x=queues["topic"] + " / " + queues["queue_id"].astype(str),
                             y=queues["depth"], marker_color=COLOR_DATA, name="depth"))
    fig.update_layout(yaxis_title="messages", xaxis_title="topic / queue")
    return _layout(fig, "Queue depth")


def slot_heatmap(grid: np.ndarray, title: str = "Index slot occupancy") -> go.Figure:
    """Entries per hash slot (or per bin of slots), laid out row by row."""
    fig = go.Figure(go.Heatmap(z=grid, colorscale="Blues", colorbar=dict(title="entries"),
                               hovertemplate="row %{y}, col %{x}: %{z}<extra></extra>"))
    fig.update_layout(yaxis=dict(autorange="reversed"))
    return _layout(fig, title, height=360)


def chain_length_histogram(lengths: np.ndarray) -> go.Figure:
    """How many occupied slots have a chain of each length."""
    lengths = np.asarray(lengths)
    lengths = lengths[lengths > 0]
    values, counts = np.unique(lengths, return_counts=True) if lengths.size else ([], [])
    fig = go.Figure(go.Bar(x=list(values), y=list(counts), marker_color=COLOR_DATA))
    fig.update_layout(xaxis_title="chain length (entries in the slot)", yaxis_title="slots")
    return _layout(fig, "Chain length distribution")


def rocksdb_files_figure(files: pd.DataFrame) -> go.Figure:
    """SST files of a RocksDB consume queue: bytes per level (file count in the hover)."""
    fig = go.Figure()
    if not files.empty:
        ssts = files[((files["kind"] == "sst") & (files["level"] >= 0)).fillna(False)]
        if not ssts.empty:
            by_level = ssts.groupby("level", as_index=False).agg(size_bytes=("size_bytes", "sum"),
                                                                 count=("size_bytes", "size"))
            fig.add_trace(go.Bar(x=["L" + str(level) for level in by_level["level"]],
                                 y=by_level["size_bytes"], customdata=by_level["count"],
                                 marker_color=COLOR_DATA,
                                 hovertemplate="%{x}: %{y:,} bytes in %{customdata} file(s)"
                                               "<extra></extra>"))
    fig.update_layout(xaxis_title="level", yaxis_title="bytes", xaxis_type="category")
    return _layout(fig, "RocksDB SST bytes per level", height=280)


SEVERITY_COLORS = {"error": "#d62728", "warning": COLOR_FILLER, "info": COLOR_DATA}


def findings_figure(findings: pd.DataFrame) -> go.Figure:
    """Number of health findings per severity (error, warning, info always shown, zeros too)."""
    fig = go.Figure()
    if not findings.empty and "severity" in findings:
        counts = findings["severity"].value_counts()
        names = list(SEVERITY_COLORS) + sorted(set(counts.index) - set(SEVERITY_COLORS))
        values = [int(counts.get(name, 0)) for name in names]
        fig.add_trace(go.Bar(y=names, x=values, orientation="h", text=values, textposition="auto",
                             marker_color=[SEVERITY_COLORS.get(n, COLOR_FREE) for n in names]))
    fig.update_layout(xaxis_title="findings", yaxis=dict(autorange="reversed", type="category"),
                      xaxis=dict(rangemode="tozero", dtick=1 if len(findings) <= 10 else None))
    return _layout(fig, "Findings by severity", height=220)
