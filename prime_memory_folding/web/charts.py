"""Small charts drawn on the server as SVG: a histogram, counts over time, a decay curve.

Every label goes through :func:`markupsafe.escape`; the result is markup ready
for a template.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence

from markupsafe import Markup, escape

__all__ = ["decay_curve", "histogram", "over_time"]

_W, _H, _PAD = 560, 180, 28


def _frame(body: str, title: str, width: int = _W, height: int = _H) -> Markup:
    return Markup(
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>{body}</svg>'
    )


def histogram(values: Sequence[float], *, bins: int = 10, title: str = "Strength") -> Markup:
    """Bars counting ``values`` in ``bins`` equal parts of [0, 1]."""
    counts = [0] * bins
    for value in values:
        counts[min(bins - 1, max(0, int(value * bins)))] += 1
    top = max(counts, default=0) or 1
    inner_w, inner_h = _W - 2 * _PAD, _H - 2 * _PAD
    bar = inner_w / bins
    parts = [f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - _PAD}" y2="{_H - _PAD}" class="axis"/>']
    for i, n in enumerate(counts):
        h = inner_h * n / top
        x = _PAD + i * bar
        parts.append(
            f'<rect x="{x + 2:.1f}" y="{_H - _PAD - h:.1f}" width="{bar - 4:.1f}" '
            f'height="{h:.1f}" class="bar"><title>{i / bins:.1f}-{(i + 1) / bins:.1f}: '
            f"{n}</title></rect>"
        )
        if n:
            parts.append(
                f'<text x="{x + bar / 2:.1f}" y="{_H - _PAD - h - 4:.1f}" '
                f'text-anchor="middle">{n}</text>'
            )
        parts.append(f'<text x="{x:.1f}" y="{_H - 8}" class="tick">{i / bins:.1f}</text>')
    parts.append(f'<text x="{_W - _PAD:.1f}" y="{_H - 8}" class="tick">1.0</text>')
    return _frame("".join(parts), f"{title} histogram")


def over_time(times: Sequence[float], *, buckets: int = 30, title: str = "Memories") -> Markup:
    """Bars counting ``times`` (Unix seconds) in ``buckets`` equal spans from first to last."""
    if not times:
        return _frame(f'<text x="{_PAD}" y="{_H / 2}">No memories yet.</text>', title)
    first, last = min(times), max(times)
    span = max(last - first, 1.0)
    counts = [0] * buckets
    for t in times:
        counts[min(buckets - 1, int((t - first) / span * buckets))] += 1
    top = max(counts) or 1
    inner_w, inner_h = _W - 2 * _PAD, _H - 2 * _PAD
    bar = inner_w / buckets
    parts = [f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - _PAD}" y2="{_H - _PAD}" class="axis"/>']
    for i, n in enumerate(counts):
        h = inner_h * n / top
        start = first + span * i / buckets
        day = dt.datetime.fromtimestamp(start, dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
        parts.append(
            f'<rect x="{_PAD + i * bar + 1:.1f}" y="{_H - _PAD - h:.1f}" width="{bar - 2:.1f}" '
            f'height="{h:.1f}" class="bar"><title>from {day}: {n}</title></rect>'
        )
    for t, anchor in ((first, "start"), (last, "end")):
        label = dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d")
        x = _PAD if anchor == "start" else _W - _PAD
        parts.append(
            f'<text x="{x}" y="{_H - 8}" text-anchor="{anchor}" class="tick">{label}</text>'
        )
    parts.append(f'<text x="{_PAD}" y="{_PAD - 10}" class="tick">most in one span: {top}</text>')
    return _frame("".join(parts), f"{title} over time")


def decay_curve(
    *,
    strength: float,
    since: float,
    half_life: float,
    now: float,
    created_at: float,
    reinforced_at: Sequence[float],
) -> Markup:
    """Strength from ``since`` on, past ``now``, with reinforcements and now marked.

    ``strength`` holds at ``since``; before it the curve is not known and
    is drawn as a dotted level line from creation.
    """
    horizon = 4 * half_life if math.isfinite(half_life) else 30 * 86_400.0
    start = min(created_at, since)
    end = max(now, since) + max(horizon / 2, now - start, 3_600.0)
    span = max(end - start, 1.0)
    inner_w, inner_h = _W - 2 * _PAD, _H - 2 * _PAD

    def x(t: float) -> float:
        return _PAD + inner_w * (t - start) / span

    def y(s: float) -> float:
        return _H - _PAD - inner_h * s

    def at(t: float) -> float:
        if not math.isfinite(half_life):
            return strength
        return float(strength * 2.0 ** (-max(t - since, 0.0) / half_life))

    points = [(since + (end - since) * k / 60, 0.0) for k in range(61)]
    path = " ".join(f"{x(t):.1f},{y(at(t)):.1f}" for t, _ in points)
    parts = [
        f'<line x1="{_PAD}" y1="{y(0)}" x2="{_W - _PAD}" y2="{y(0)}" class="axis"/>',
        f'<line x1="{_PAD}" y1="{y(1)}" x2="{_W - _PAD}" y2="{y(1)}" class="grid"/>',
        f'<text x="4" y="{y(1) + 4}" class="tick">1</text>',
        f'<text x="4" y="{y(0) + 4}" class="tick">0</text>',
        f'<polyline points="{path}" class="curve"/>',
    ]
    if since > start:
        parts.append(
            f'<line x1="{x(start):.1f}" y1="{y(strength):.1f}" x2="{x(since):.1f}" '
            f'y2="{y(strength):.1f}" class="unknown"/>'
        )
    parts.append(
        f'<circle cx="{x(created_at):.1f}" cy="{y(at(created_at)):.1f}" r="4" class="created">'
        "<title>stored</title></circle>"
    )
    for t in reinforced_at:
        parts.append(
            f'<circle cx="{x(t):.1f}" cy="{y(at(t)):.1f}" r="5" class="reinforced">'
            "<title>reinforced</title></circle>"
        )
    parts.append(
        f'<line x1="{x(now):.1f}" y1="{_PAD - 6}" x2="{x(now):.1f}" y2="{y(0)}" class="now"/>'
        f'<text x="{x(now) + 4:.1f}" y="{_PAD}" class="tick">now {at(now):.3f}</text>'
    )
    return _frame("".join(parts), "Strength over time")
