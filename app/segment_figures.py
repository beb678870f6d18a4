"""Plotly figures of the commit log that stay readable at any number of segments (no streamlit).

| figure                      | shows                                                                   |
|-----------------------------|-------------------------------------------------------------------------|
| `log_strip_figure`          | the whole log as one strip along the physical offset axis: records,     |
|                             | BLANK filler and free space of every segment (binned past 400 segments),|
|                             | the expired range before the first file and the active segment          |
| `pointer_zoom_figure`       | one lane per pointer (wrote, committed, flushed, reput, confirm) over   |
|                             | the active segment, zoomed to the pointers when they sit close, with    |
|                             | every gap to the leading pointer labelled in bytes                      |
| `recent_segments_figure`    | the newest segments' fill levels: the log rolling to new files          |

Heights are fixed (they never grow with the segment count), so a 1,000-segment log draws in the same
space as a one-segment log. The pointer names are RocketMQ's `MappedFile` positions (wrotePosition,
committedPosition, flushedPosition), the `ReputMessageService`'s reputFromOffset and the commit log's
confirmOffset.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

POINTER_ORDER = ("wrote", "committed", "flushed", "reput", "confirm")
POINTER_COLORS = {
    "wrote": "#d62728", "committed": "#ff7f0e", "flushed": "#2ca02c", "reput": "#1f77b4",
    "confirm": "#9467bd",
}
COLOR_DATA = "#4c78a8"
COLOR_DATA_ALT = "#72a0cc"        # every other segment, so neighbours stay apart in the strip
COLOR_FILLER = "#f58518"
COLOR_FREE = "#e5e5e5"
COLOR_EXPIRED = "#bdbdbd"
COLOR_LAG = "#d62728"
MAX_STRIP_BARS = 400              # more segments than this are summed in bins
STRIP_HEIGHT_PX = 190
ZOOM_HEIGHT_PX = 300
RECENT_HEIGHT_PX = 300
RECENT_SEGMENTS = 10
ZOOM_WHEN_SPAN_BELOW = 0.05       # pointers within 5% of a segment: zoom in, or the gaps vanish


def _margins(fig: go.Figure, title: str, height: int) -> go.Figure:
    fig.update_layout(title=dict(text=title, x=0, xanchor="left"), height=height,
                      margin=dict(l=10, r=20, t=60, b=40),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1))
    return fig


def active_pointers(pointers: Mapping[str, int]) -> list[tuple[str, int]]:
    """(name, phy_offset) of the pointers that are set (>= 0), in POINTER_ORDER."""
    return [(name, int(pointers[name])) for name in POINTER_ORDER
            if pointers.get(name) is not None and pointers[name] >= 0]


def active_segment(segments: Sequence, phy_offset: int):
    """The segment holding `phy_offset` (its end counts as inside the newest file), or None."""
    holding = None
    for segment in segments:
        if segment.file_from_offset <= phy_offset <= segment.file_end_offset:
            holding = segment
            if phy_offset < segment.file_end_offset:
                return segment
    return holding


def strip_bins(segments: Sequence, max_bars: int = MAX_STRIP_BARS) -> list[dict]:
    """Consecutive segments summed into at most `max_bars` bins (one bin per segment when fewer)."""
    per_bin = max(1, math.ceil(len(segments) / max_bars))
    bins = []
    for first in range(0, len(segments), per_bin):
        group = segments[first:first + per_bin]
        bins.append({
            "first": group[0].name, "last": group[-1].name, "count": len(group),
            "from": group[0].file_from_offset, "number": first,
            "data": sum(s.data_bytes for s in group), "filler": sum(s.filler_bytes for s in group),
            "free": sum(s.size_bytes - s.data_bytes - s.filler_bytes for s in group),
        })
    return bins


def log_strip_figure(segments: Sequence, pointers: Mapping[str, int]) -> go.Figure:
    """The whole log on one strip (fixed height): records, BLANK filler and free space per segment
    or per bin of segments, the expired range before the oldest file, and the active segment."""
    fig = go.Figure()
    bins = strip_bins(segments)
    label = "segment" if all(b["count"] == 1 for b in bins) else \
        f"{bins[0]['count'] if bins else 1} segments"
    hover = [f"{b['first']}" if b["count"] == 1 else f"{b['first']} .. {b['last']} ({b['count']} files)"
             for b in bins]
    data_colors = [COLOR_DATA if index % 2 == 0 else COLOR_DATA_ALT for index in range(len(bins))]
    for name, color, base_of, width_of in (
            ("records", data_colors, lambda b: b["from"], lambda b: b["data"]),
            ("BLANK filler", COLOR_FILLER, lambda b: b["from"] + b["data"], lambda b: b["filler"]),
            ("free", COLOR_FREE, lambda b: b["from"] + b["data"] + b["filler"], lambda b: b["free"])):
        fig.add_trace(go.Bar(y=["log"] * len(bins), x=[width_of(b) for b in bins],
                             base=[base_of(b) for b in bins], orientation="h", name=name,
                             marker=dict(color=color, line=dict(width=0)), customdata=hover,
                             hovertemplate="%{customdata}<br>from %{base:,} +%{x:,} bytes<extra>"
                                           + name + "</extra>"))
    if segments and segments[0].file_from_offset > 0:
        fig.add_trace(go.Bar(y=["log"], x=[segments[0].file_from_offset], base=[0], orientation="h",
                             name="expired (deleted)", marker_color=COLOR_EXPIRED,
                             hovertemplate="0 .. %{x:,}: deleted by cleanup<extra></extra>"))
    set_pointers = active_pointers(pointers)
    if set_pointers:
        lead_name, lead = max(set_pointers, key=lambda item: item[1])
        fig.add_vline(x=lead, line_color=POINTER_COLORS[lead_name], line_width=2,
                      annotation_text=f"{lead_name} {lead:,}", annotation_position="bottom left",
                      annotation_font_color=POINTER_COLORS[lead_name])
        holding = active_segment(segments, lead)
        if holding is not None:
            fig.add_vrect(x0=holding.file_from_offset, x1=holding.file_end_offset,
                          line=dict(color="black", width=1), fillcolor="rgba(0,0,0,0)")
    total = len(segments)
    fig.update_layout(barmode="overlay", bargap=0.35,
                      xaxis=dict(title="physical offset (bytes)", tickformat=",d", rangemode="tozero"),
                      yaxis=dict(showticklabels=False, fixedrange=True))
    return _margins(fig, f"Whole commit log: {total:,} segment file(s), one bar per {label}",
                    STRIP_HEIGHT_PX)


def zoom_range(segments: Sequence, pointers: Mapping[str, int]) -> tuple[float, float, bool, object]:
    """(x0, x1, zoomed, active segment): the active segment, or a window around the pointers when
    they sit within ZOOM_WHEN_SPAN_BELOW of a segment (a 200 KB lag is invisible on 1 GiB)."""
    values = [value for _, value in active_pointers(pointers)]
    if not values:
        return 0.0, 1.0, False, None
    lead = max(values)
    segment = active_segment(segments, lead)
    span = lead - min(values)
    size = segment.size_bytes if segment is not None else max(1, lead)
    if span == 0 or span >= ZOOM_WHEN_SPAN_BELOW * size or segment is None:
        low = min(min(values), segment.file_from_offset if segment else 0)
        high = max(lead, segment.file_end_offset if segment else lead)
        pad = 0.02 * max(1, high - low)
        return low - pad, high + pad, False, segment
    pad = max(span * 0.6, 64)
    return min(values) - pad, lead + pad, True, segment


def pointer_zoom_figure(segments: Sequence, pointers: Mapping[str, int]) -> go.Figure:
    """One lane per pointer over the active segment: a bar up to the pointer, a marker at it, and the
    gap to the leading pointer drawn as a red span labelled in bytes (a lagging flush is a long one)."""
    fig = go.Figure()
    set_pointers = active_pointers(pointers)
    x0, x1, zoomed, segment = zoom_range(segments, pointers)
    lead = max((value for _, value in set_pointers), default=0)
    lead_name = next((name for name, value in set_pointers if value == lead), "")
    lanes = [f"{name}<br>{value:,}" for name, value in set_pointers]
    for (name, value), lane in zip(set_pointers, lanes):
        fig.add_trace(go.Bar(y=[lane], x=[max(0.0, value - x0)], base=[x0], orientation="h",
                             marker=dict(color=POINTER_COLORS[name], opacity=0.35), showlegend=False,
                             hovertemplate=f"{name}: {value:,}<extra></extra>"))
        gap = lead - value
        fig.add_trace(go.Scatter(
            y=[lane], x=[value], mode="markers", name=name, showlegend=False,
            marker=dict(color=POINTER_COLORS[name], size=13, symbol="diamond",
                        line=dict(color="white", width=1)),
            hovertemplate=f"{name}: {value:,}" + (f" ({gap:,} bytes behind {lead_name})" if gap else "")
                          + "<extra></extra>"))
        if gap > 0:
            fig.add_trace(go.Scatter(y=[lane, lane], x=[value, lead], mode="lines", showlegend=False,
                                     line=dict(color=COLOR_LAG, width=3), hoverinfo="skip"))
            fig.add_annotation(y=lane, x=(value + lead) / 2, yshift=14, showarrow=False,
                               text=f"<b>{gap:,} bytes behind {lead_name}</b>",
                               font=dict(color=COLOR_LAG, size=12))
        elif name != lead_name:
            fig.add_annotation(y=lane, x=value, xshift=8, xanchor="left", showarrow=False,
                               text=f"= {lead_name}", font=dict(color="#555555"))
    if segment is not None:
        for edge, text, where in ((segment.file_from_offset, "segment start", "bottom right"),
                                  (segment.file_end_offset, "segment end", "bottom left")):
            if x0 <= edge <= x1:
                fig.add_vline(x=edge, line_color="#555555", line_dash="dash",
                              annotation_text=text, annotation_position=where,
                              annotation_font_color="#555555")
    title = "Active segment"
    if segment is not None:
        position = lead - segment.file_from_offset
        title += (f" {segment.name}<br><sup>{lead_name} at position {position:,} of "
                  f"{segment.size_bytes:,} ({100.0 * position / segment.size_bytes:.1f}%)"
                  + ("; zoomed to the pointers" if zoomed else "") + "</sup>")
    fig.update_layout(barmode="overlay", showlegend=False,
                      xaxis=dict(title="physical offset (bytes)", range=[x0, x1], tickformat=",d"),
                      yaxis=dict(autorange="reversed", type="category", fixedrange=True,
                                 automargin=True))
    return _margins(fig, title, ZOOM_HEIGHT_PX)


def recent_segments_figure(segments: Sequence, count: int = RECENT_SEGMENTS) -> go.Figure:
    """Fill level of the newest `count` segments (records, BLANK filler, free); the newest is
    outlined. When a file fills, a new one appears on the right and the oldest leaves the window."""
    first = max(0, len(segments) - count)
    recent = list(segments[first:])
    labels = [f"#{first + index}" for index in range(len(recent))]
    fig = go.Figure()
    for name, color, part in (("records", COLOR_DATA, lambda s: s.data_bytes),
                              ("BLANK filler", COLOR_FILLER, lambda s: s.filler_bytes),
                              ("free", COLOR_FREE, lambda s: s.size_bytes - s.data_bytes - s.filler_bytes)):
        fig.add_trace(go.Bar(
            x=labels, y=[100.0 * part(s) / s.size_bytes if s.size_bytes else 0.0 for s in recent],
            name=name, marker=dict(color=color,
                                   line=dict(color=["black" if index == len(recent) - 1 else color
                                                    for index in range(len(recent))],
                                             width=[2 if index == len(recent) - 1 else 0
                                                    for index in range(len(recent))])),
            customdata=[[s.name, part(s)] for s in recent],
            hovertemplate="%{customdata[0]}<br>%{y:.1f}% (%{customdata[1]:,} bytes)<extra>" + name
                          + "</extra>"))
    fig.update_layout(barmode="stack", yaxis=dict(title="% of file", range=[0, 100]),
                      xaxis=dict(title="segment number (oldest left)", type="category"))
    _margins(fig, f"Newest {len(recent)} of {len(segments):,} segment files<br><sup>a full file "
                  "rolls: the next one opens on the right</sup>", RECENT_HEIGHT_PX)
    fig.update_layout(showlegend=False)    # same colours as the strip's legend above
    return fig


LAB_POINTER_STYLE = {   # recovery-lab pointer -> (colour, symbol)
    "file end (max wrote)": (POINTER_COLORS["wrote"], "diamond"),
    "valid end (scan)": (POINTER_COLORS["flushed"], "triangle-down"),
    "consume queues end": (POINTER_COLORS["confirm"], "square"),
    "reput": (POINTER_COLORS["reput"], "circle"),
}


def _segment_pieces(segments: Sequence, x0: float, x1: float) -> list[tuple[str, str, int, int]]:
    """(piece, colour, base, width) of the segments' records, BLANK filler and free space in [x0, x1]."""
    pieces = []
    for segment in segments:
        if segment.file_end_offset < x0 or segment.file_from_offset > x1:
            continue
        start = segment.file_from_offset
        for piece, color, width in (("records", COLOR_DATA, segment.data_bytes),
                                    ("BLANK filler", COLOR_FILLER, segment.filler_bytes),
                                    ("free", COLOR_FREE,
                                     segment.size_bytes - segment.data_bytes - segment.filler_bytes)):
            if width > 0:
                pieces.append((piece, color, start, width))
            start += width
    return pieces


def recovery_segments_figure(segments_before: Sequence, segments_after: Sequence,
                             before: Mapping[str, int], after: Mapping[str, int],
                             cut_bytes: int | None = None) -> go.Figure:
    """The recovery lab's pointers on the segments: a lane for the files as the crash left them and
    one for the files after recovery, each with its pointers as markers, and what recovery cut after
    the valid end shaded and labelled in bytes: `cut_bytes` (the report's dirty bytes), or by default
    everything from the valid end to the old file end."""
    fig = go.Figure()
    values = [v for state in (before, after) for v in state.values() if v is not None and v >= 0]
    if not values:
        return _margins(fig, "No pointers to draw", ZOOM_HEIGHT_PX)
    low, high = min(values), max(values)
    holding = active_segment(segments_before or segments_after, high)
    size = holding.size_bytes if holding is not None else max(1, high)
    if 0 < high - low < ZOOM_WHEN_SPAN_BELOW * size:
        pad = max((high - low) * 0.6, 64)
        x0, x1 = low - pad, high + pad
    else:
        first = active_segment(segments_before or segments_after, low)
        x0 = min(low, first.file_from_offset if first is not None else low)
        x1 = max(high, holding.file_end_offset if holding is not None else high)
        pad = 0.02 * max(1, x1 - x0)
        x0, x1 = x0 - pad, x1 + pad
    shown: set[str] = set()
    for lane, segments, state in (("before recovery", segments_before, before),
                                  ("after recovery", segments_after, after)):
        for piece, color, base, width in _segment_pieces(segments, x0, x1):
            fig.add_trace(go.Bar(y=[lane], x=[width], base=[base], orientation="h", name=piece,
                                 marker_color=color, legendgroup=piece, showlegend=piece not in shown,
                                 hovertemplate=f"{piece}: %{{base:,}} +%{{x:,}} bytes<extra></extra>"))
            shown.add(piece)
        for name, value in state.items():
            if value is None or value < 0:
                continue
            color, symbol = LAB_POINTER_STYLE.get(name, ("#333333", "circle"))
            fig.add_trace(go.Scatter(y=[lane], x=[value], mode="markers", name=name, legendgroup=name,
                                     showlegend=name not in shown,
                                     marker=dict(color=color, symbol=symbol, size=15,
                                                 line=dict(color="white", width=1)),
                                     hovertemplate=f"{lane}: {name} {value:,}<extra></extra>"))
            shown.add(name)
    cut_from = after.get("valid end (scan)")
    cut_to = before.get("file end (max wrote)")
    if cut_bytes is not None and cut_from is not None:
        cut_to = cut_from + cut_bytes
    if cut_bytes == 0 and cut_from is not None and cut_from >= 0:
        fig.add_vline(x=cut_from, line_color=POINTER_COLORS["flushed"], line_width=2)
        fig.add_annotation(x=cut_from, y=1.02, yref="paper", showarrow=False, xanchor="left",
                           text=f"<b>valid up to {cut_from:,}: nothing to cut</b>",
                           font=dict(color=POINTER_COLORS["flushed"]))
    elif cut_from is not None and cut_to is not None and cut_to > cut_from >= 0:
        fig.add_vrect(x0=cut_from, x1=cut_to, fillcolor=COLOR_LAG, opacity=0.18, line_width=0)
        fig.add_vline(x=cut_from, line_color=COLOR_LAG, line_width=2)
        fig.add_annotation(x=cut_from, y=1.02, yref="paper", showarrow=False, xanchor="left",
                           text=f"<b>recovery cut at {cut_from:,}: {cut_to - cut_from:,} bytes "
                                "dropped</b>", font=dict(color=COLOR_LAG))
    fig.update_layout(barmode="overlay", bargap=0.45,
                      xaxis=dict(title="physical offset (bytes)", range=[x0, x1], tickformat=",d"),
                      yaxis=dict(autorange="reversed", type="category", fixedrange=True,
                                 automargin=True),
                      legend=dict(orientation="h", yanchor="top", y=-0.35, xanchor="left", x=0))
    _margins(fig, "Pointers on the segments, before and after recovery", ZOOM_HEIGHT_PX + 40)
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.35, xanchor="left", x=0),
                      margin=dict(b=110))
    return fig
