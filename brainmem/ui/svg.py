"""Server-side SVG: factor bars, the R(t) curve, histograms and the graph.

Drawn on the server so the pages need no JavaScript library and work offline.
Every piece of text goes through :func:`esc`; callers mark the result safe.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timezone
from html import escape
from typing import Any
from urllib.parse import quote

from ..model import iso
from ..validate import LAST_TIME

#: Node fill per trace type (colour-blind-safe Okabe-Ito palette).
TYPE_COLOURS = {"episodic": "#0072B2", "semantic": "#009E73", "procedural": "#E69F00",
                "working": "#CC79A7", "prospective": "#D55E00", "insight": "#56B4E9"}
EDGE_COLOURS = {"co_activated": "#444", "episode_next": "#999", "derived_from": "#009E73",
                "supersedes": "#D55E00"}


def esc(text: Any) -> str:
    return escape(str(text), quote=True)


def trace_href(trace_id: Any) -> str:
    """The address of a trace's page, the id quoted whole: an imported id may hold
    ``/``, ``#``, ``?`` or spaces."""
    return "/trace/" + quote(str(trace_id), safe="")


def _num(x: float) -> str:
    return f"{x:.1f}"


def bars(factors: Sequence[tuple[str, float, float]], width: int = 260) -> str:
    """One horizontal bar per (name, value, scale): the bar is value/scale of the width."""
    row, label = 14, 92
    height = row * len(factors) + 2
    parts = [f'<svg class="bars" width="{width + label + 60}" height="{height}" role="img" '
             f'aria-label="ranking factors">']
    for i, (name, value, scale) in enumerate(factors):
        y = i * row + 1
        frac = 0.0 if scale <= 0 else max(0.0, min(1.0, value / scale))
        parts.append(
            f'<text x="0" y="{y + 10}" class="lbl">{esc(name)}</text>'
            f'<rect x="{label}" y="{y + 2}" width="{width}" height="{row - 4}" class="track"/>'
            f'<rect x="{label}" y="{y + 2}" width="{_num(frac * width)}" height="{row - 4}" '
            f'class="bar" data-factor="{esc(name)}"/>'
            f'<text x="{label + width + 4}" y="{y + 10}" class="val">{value:.3g}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def retrievability_curve(trace: Any, now: float, threshold: float, recall_times: Sequence[float],
                         width: int = 640, height: int = 200) -> tuple[str, float | None]:
    """R(t) of a trace from its creation to now and ahead to the prune threshold.

    Returns the SVG and the time R reaches ``threshold`` (None when it never does).
    Only the current (strength, stability, last access) are stored, so the curve
    before the last access is the model's value then (flat at ``strength``), drawn
    dashed, with the recorded recalls as ticks.
    """
    s0, stab, last = float(trace.strength), float(trace.stability), float(trace.last_accessed_at)
    crossing = None
    if stab > 0 and s0 > threshold > 0:
        crossing = last + stab * math.log(s0 / threshold)
        if crossing > LAST_TIME:  # after the year 9999: no date to show, never as far as one can say
            crossing = None
    start = min(float(trace.created_at), last)
    end = max(now, crossing if crossing is not None else now + max(stab, 86_400.0))
    end = min(end, now + 3650 * 86_400.0) if end > start else start + 86_400.0
    end = min(end, LAST_TIME)  # a curve past the year 9999 has no date to end on
    start = min(start, end - 86_400.0)
    left, right, top, bottom = 40, 10, 10, 30
    w, h = width - left - right, height - top - bottom

    def x(t: float) -> float:
        return left + (t - start) / (end - start) * w

    def y(r: float) -> float:
        return top + (1 - r) * h

    def r_at(t: float) -> float:
        return 0.0 if stab <= 0 else s0 * math.exp(-max(0.0, t - last) / stab)

    steps = 120
    points = [(last + (end - last) * i / steps) for i in range(steps + 1)] if end > last else [last]
    path = " ".join(f"{'M' if i == 0 else 'L'}{_num(x(t))},{_num(y(r_at(t)))}" for i, t in enumerate(points))
    parts = [f'<svg class="curve" width="{width}" height="{height}" role="img" aria-label="R(t)">',
             f'<line x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}" class="axis"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + h}" class="axis"/>',
             f'<text x="2" y="{top + 8}" class="lbl">1.0</text>',
             f'<text x="2" y="{top + h}" class="lbl">0</text>',
             f'<line x1="{left}" y1="{_num(y(threshold))}" x2="{left + w}" y2="{_num(y(threshold))}" '
             f'class="threshold"/>',
             f'<text x="{left + 4}" y="{_num(y(threshold) - 3)}" class="lbl">prune threshold {threshold:g}</text>']
    if last > start:
        parts.append(f'<line x1="{_num(x(start))}" y1="{_num(y(s0))}" x2="{_num(x(last))}" y2="{_num(y(s0))}" '
                     'class="past"/>')
    parts.append(f'<path d="{path}" class="r"/>')
    for t in recall_times:
        if start <= t <= end:
            parts.append(f'<line x1="{_num(x(t))}" y1="{top + h}" x2="{_num(x(t))}" y2="{top + h - 8}" '
                         'class="recall"/>')
    parts.append(f'<line x1="{_num(x(now))}" y1="{top}" x2="{_num(x(now))}" y2="{top + h}" class="now"/>'
                 f'<text x="{_num(x(now) + 3)}" y="{top + 10}" class="lbl">now</text>')
    parts.append(f'<text x="{left}" y="{height - 8}" class="lbl">{esc(iso(start))}</text>'
                 f'<text x="{left + w}" y="{height - 8}" class="lbl" text-anchor="end">{esc(iso(end))}</text>')
    parts.append("</svg>")
    return "".join(parts), crossing


def histogram(counts: Sequence[int], labels: Sequence[str], width: int = 420, height: int = 140) -> str:
    """Vertical bars of ``counts`` with a label under each."""
    top, bottom = 14, 20
    n = max(1, len(counts))
    slot = width / n
    peak = max(counts) if counts and max(counts) > 0 else 1
    parts = [f'<svg class="hist" width="{width}" height="{height}" role="img" aria-label="histogram">']
    for i, (count, label) in enumerate(zip(counts, labels)):
        bh = (height - top - bottom) * count / peak
        bx = i * slot + 2
        parts.append(f'<rect x="{_num(bx)}" y="{_num(height - bottom - bh)}" width="{_num(slot - 4)}" '
                     f'height="{_num(bh)}" class="bar"/>'
                     f'<text x="{_num(bx + slot / 2 - 2)}" y="{_num(height - bottom - bh - 2)}" '
                     f'class="val" text-anchor="middle">{count}</text>'
                     f'<text x="{_num(bx + slot / 2 - 2)}" y="{height - 6}" class="lbl" '
                     f'text-anchor="middle">{esc(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def growth(days: Sequence[dict[str, Any]], width: int = 420, height: int = 140) -> str:
    """Cumulative traces added (solid) and of them still live (dashed) by day."""
    if not days:
        return '<p class="muted">No traces yet.</p>'
    left, top, bottom = 40, 10, 22
    w, h = width - left - 10, height - top - bottom
    added = live = 0
    pts_a, pts_l = [], []
    for d in days:
        added += d["added"]
        live += d["added"] - d["deleted"]
        pts_a.append((_day(d["day"]), added))
        pts_l.append((_day(d["day"]), live))
    t0, t1 = _day(days[0]["day"]), max(_day(days[-1]["day"]), _day(days[0]["day"]) + 86_400)
    peak = max(1, added)

    def line(points: list[tuple[float, int]], cls: str) -> str:
        coords = " ".join(f"{_num(left + (t - t0) / (t1 - t0) * w)},{_num(top + (1 - v / peak) * h)}"
                          for t, v in points)
        return f'<polyline points="{coords}" class="{cls}"/>'

    return (f'<svg class="growth" width="{width}" height="{height}" role="img" aria-label="growth">'
            f'<line x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}" class="axis"/>'
            f'<text x="2" y="{top + 8}" class="lbl">{peak}</text>'
            f'{line(pts_a, "r")}{line(pts_l, "past")}'
            f'<text x="{left}" y="{height - 6}" class="lbl">{esc(day_text(t0))}</text>'
            f'<text x="{left + w}" y="{height - 6}" class="lbl" text-anchor="end">{esc(day_text(t1))}</text>'
            "</svg>")


def day_text(ts: float) -> str:
    """"YYYY-MM-DD" of unix seconds (UTC)."""
    return datetime.fromtimestamp(ts, tz=timezone.utc).date().isoformat()  # strftime: "999-03-01"


def _day(day: str | float) -> float:
    """Unix seconds of a "YYYY-MM-DD" day (or seconds as they are)."""
    if isinstance(day, str):
        return datetime.fromisoformat(day[:10]).replace(tzinfo=timezone.utc).timestamp()
    return float(day)


def graph(view: dict[str, Any], centre: Sequence[str], width: int = 760, height: int = 520) -> str:
    """The nodes and weighted edges of :meth:`Brain.neighbourhood`, laid out by networkx.

    Each node links to its trace page; each edge shows its kind (colour) and weight
    (thickness and a label).
    """
    import networkx as nx

    nodes, edges = view["nodes"], view["edges"]
    if not nodes:
        return '<p class="muted">No nodes.</p>'
    g = nx.Graph()
    g.add_nodes_from(n["id"] for n in nodes)
    for e in edges:
        g.add_edge(e["src"], e["dst"], weight=max(e["weight"], 0.05))
    pos = nx.spring_layout(g, seed=0, weight="weight") if len(nodes) > 1 else {nodes[0]["id"]: (0.0, 0.0)}
    pad, label_room = 40, 190  # node titles are written to the right of each node
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    spanx, spany = (max(xs) - min(xs)) or 1.0, (max(ys) - min(ys)) or 1.0

    def at(node: str) -> tuple[float, float]:
        px, py = pos[node]
        return (pad + (px - min(xs)) / spanx * (width - pad - label_room),
                pad + (py - min(ys)) / spany * (height - 2 * pad))

    parts = [f'<svg class="graph" width="{width}" height="{height}" role="img" aria-label="graph">']
    by_pair: dict[frozenset[str], list[dict[str, Any]]] = {}
    for e in edges:
        by_pair.setdefault(frozenset((e["src"], e["dst"])), []).append(e)
    for group in by_pair.values():
        for k, e in enumerate(group):
            # two kinds joining one pair: side by side, labels apart (the offset's side is
            # taken from the pair in id order, so a reversed edge does not land on the other)
            a, b = sorted((e["src"], e["dst"]))
            (x1, y1), (x2, y2) = at(a), at(b)
            length = math.hypot(x2 - x1, y2 - y1) or 1.0
            shift = (k - (len(group) - 1) / 2) * 8
            dx, dy = -(y2 - y1) / length * shift, (x2 - x1) / length * shift
            colour = EDGE_COLOURS.get(e["kind"], "#444")
            parts.append(
                f'<g class="edge" data-kind="{esc(e["kind"])}" data-weight="{e["weight"]:.3f}">'
                f'<line x1="{_num(x1 + dx)}" y1="{_num(y1 + dy)}" x2="{_num(x2 + dx)}" y2="{_num(y2 + dy)}" '
                f'stroke="{colour}" stroke-width="{_num(1 + 5 * e["weight"])}" stroke-opacity="0.7">'
                f'<title>{esc(e["kind"])} {e["weight"]:.2f}</title></line>'
                f'<text x="{_num((x1 + x2) / 2 + 3 * dx)}" y="{_num((y1 + y2) / 2 + 3 * dy)}" '
                f'class="ew" fill="{colour}">{e["weight"]:.2f}</text></g>'
            )
    for n in nodes:
        cx, cy = at(n["id"])
        colour = "#56B4E9" if n.get("derived") else TYPE_COLOURS.get(n.get("type") or "", "#888")
        ring = " centre" if n["id"] in centre else ""
        parts.append(
            f'<a href="{esc(trace_href(n["id"]))}" class="node{ring}" data-id="{esc(n["id"])}">'
            f'<circle cx="{_num(cx)}" cy="{_num(cy)}" r="{9 if ring else 7}" fill="{colour}">'
            f'<title>{esc(n["title"])}</title></circle>'
            f'<text x="{_num(cx + 11)}" y="{_num(cy + 4)}" class="nl">{esc(n["title"][:34])}</text></a>'
        )
    parts.append("</svg>")
    return "".join(parts)
