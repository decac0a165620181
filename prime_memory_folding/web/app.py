"""The inspector's pages and actions: a Starlette app over one engine.

Pages are rendered on the server with Jinja2 (autoescaped) and work without
JavaScript; htmx, shipped in ``static/``, adds live search and live updates.
Every action is a POST with a CSRF token, and each one is a single engine call
that writes all or nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from ..core import citations as cite_check
from ..core.address import unpack
from ..core.citations import CitationState
from ..core.records import Chain, Hit, Record
from ..engine.facade import MemoryEngine
from ..errors import InvalidInput, NotAvailable, NotFound, PrimeMemoryError
from ..fold.folding import FoldReport
from ..storage.archive import REASONS
from . import charts
from .filters import ORDERS, PAGE_SIZES, BadFilter, Filters
from .security import CSRF_FIELD, CsrfError, Guard, Secrets, check_csrf

__all__ = ["TEXT_LIMIT", "create_app"]

#: How many text matches the memories page ranks before gates and paging: the
#: best hundred keep a text query within a few milliseconds at 100,000 records.
TEXT_LIMIT = 100
#: Seconds between the live page's polls.
POLL_SECONDS = 2
#: The most records a bulk action touches at once.
BULK_LIMIT = 100_000
#: The metadata key that holds a record's citations (``store(cites=...)``).
_CITES = "cites"
_STATIC = Path(__file__).with_name("static")
_ACTIONS = {
    "forget": "Forget (into the archive)",
    "move": "Move to scope",
    "tag": "Add tag",
    "untag": "Remove tag",
}
#: Each archive reason, as the archive page's filters and labels say it.
_REASONS = {
    "pruned": "pruned by a fold",
    "forgotten": "forgotten",
    "folded": "folded into another",
    "replaced": "replaced by an update",
    "superseded": "superseded by a newer memory",
    "stale": "stale: its code changed",
}
#: How each citation state reads beside its badge (the badge's mark is decoration only).
_CITATION_STATES = {
    "verified": ("✓", "verified: the cited code is unchanged"),
    "moved": ("→", "moved: the same code is elsewhere"),
    "stale": ("✗", "stale: the cited code changed or is gone"),
    "unchecked": ("?", "unchecked: the repository is not on this machine"),
}
_SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class BadRequest(Exception):
    """A request that cannot be carried out; the message says why. Nothing was changed."""


def _when(ts: float | None) -> str:
    if ts is None or not math.isfinite(ts):
        return "never"
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _excerpt(text: str, length: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= length else flat[: length - 1] + "…"


def _half_life(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "never decays"
    days = seconds / 86_400
    return f"{days:.3g} days" if days >= 1 else f"{seconds / 3600:.3g} hours"


def _local(target: object, default: str) -> str:
    """A redirect target only within this app: a path, never another site."""
    if isinstance(target, str) and target.startswith("/") and not target.startswith("//"):
        return target if "\\" not in target else default
    return default


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("prime_memory_folding.web", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=_when, size=_size, excerpt=_excerpt, half_life=_half_life)
    env.globals.update(
        ORDERS=ORDERS,
        PAGE_SIZES=PAGE_SIZES,
        ACTIONS=_ACTIONS,
        REASONS={reason: _REASONS.get(reason, reason) for reason in REASONS},
        CITATION_STATES=_CITATION_STATES,
    )
    return env


class Inspector:
    """The routes, bound to one engine and one set of secrets."""

    def __init__(self, engine: MemoryEngine, keys: Secrets) -> None:
        self.engine = engine
        self.keys = keys
        self.templates = Jinja2Templates(env=_environment())
        self.flash: str | None = None
        self.last_fold: FoldReport | None = None

    # -- rendering -----------------------------------------------------------

    def render(
        self, request: Request, name: str, status: int = 200, **context: Any
    ) -> HTMLResponse:
        flash = None
        if not name.startswith("_"):  # fragments (live search, live feed) leave it be
            flash, self.flash = self.flash, None
        context.setdefault("flash", flash)
        return self.templates.TemplateResponse(
            request,
            name,
            {
                "csrf": self.keys.csrf,
                "csrf_field": CSRF_FIELD,
                "poll": POLL_SECONDS,
                "text_limit": TEXT_LIMIT,
                **context,
            },
            status_code=status,
        )

    def done(self, message: str, target: str) -> RedirectResponse:
        self.flash = message
        return RedirectResponse(target, status_code=303)

    async def form(self, request: Request) -> FormData:
        form = await request.form()
        check_csrf(request, form.get(CSRF_FIELD), self.keys)
        return form

    # -- memories ------------------------------------------------------------

    def search(self, filters: Filters) -> tuple[int, list[tuple[Hit, dict[str, float]]]]:
        """One page of the memories page: the count and the hits with their score parts."""
        engine = self.engine
        gates = filters.gates()
        offset = (filters.page - 1) * filters.size
        text_parts: dict[str, dict[str, float]] = {}
        checked: dict[str, tuple[CitationState, ...]] = {}
        among: list[str] | None = None
        order = filters.order
        if filters.q:
            found = engine.query(text=filters.q, limit=TEXT_LIMIT, filters=gates)
            text_parts = {h.record.record_id: h.score_parts for h in found}
            checked = {h.record.record_id: h.citations for h in found if h.citations}
            among = list(text_parts)
            if order == "relevance":
                order = "given"
        page = engine.browse(
            filters=gates,
            **filters.browse_bounds(),
            among=among,
            order=order,
            offset=offset,
            limit=filters.size,
        )
        rows = [
            (
                self._with_citations(hit, checked),
                {**text_parts.get(hit.record.record_id, {}), **hit.score_parts},
            )
            for hit in page.hits
        ]
        return page.total, rows

    def _with_citations(self, hit: Hit, checked: dict[str, tuple[CitationState, ...]]) -> Hit:
        """``hit`` with its citations checked: the text query's check, else one now."""
        if hit.citations or not hit.record.metadata.get(_CITES):
            return hit
        rid = hit.record.record_id
        states = checked.get(rid)
        if states is None:
            states = self._check_citations(hit.record)
        return replace(hit, citations=states) if states else hit

    def matching_ids(self, filters: Filters) -> list[str]:
        """Every id the filters match (the text query's best ``TEXT_LIMIT`` with one)."""
        engine = self.engine
        gates = filters.gates()
        plain = not filters.q and filters.max_strength >= 1 and not (filters.since or filters.until)
        if plain:
            return engine.match_ids(filters=gates)
        among = None
        if filters.q:
            found = engine.query(text=filters.q, limit=TEXT_LIMIT, filters=gates)
            among = [h.record.record_id for h in found]
        ids: list[str] = []
        while len(ids) < BULK_LIMIT:
            page = engine.browse(
                filters=gates,
                **filters.browse_bounds(),
                among=among,
                order="given" if among is not None else "oldest",
                offset=len(ids),
                limit=1_000,
            )
            ids.extend(h.record.record_id for h in page.hits)
            if len(ids) >= page.total or not page.hits:
                break
        return ids

    async def memories(self, request: Request) -> Response:
        partial = request.headers.get("hx-target") == "results"
        try:
            filters = Filters.read(request.query_params)
            total, rows = self.search(filters)
        except (BadFilter, InvalidInput) as exc:
            if partial:
                return self.render(request, "_error_fragment.html", 400, message=str(exc))
            return self.render(
                request,
                "memories.html",
                400,
                filters=Filters(),
                raw=request.query_params,
                error=str(exc),
                total=0,
                rows=[],
                scopes=self.engine.stats().scopes,
            )
        context: dict[str, Any] = {
            "filters": filters,
            "raw": request.query_params,
            "total": total,
            "rows": rows,
            "pages": max(1, math.ceil(total / filters.size)),
            "error": None,
        }
        if partial:
            return self.render(request, "_results.html", **context)
        return self.render(request, "memories.html", scopes=self.engine.stats().scopes, **context)

    async def bulk(self, request: Request) -> Response:
        form = await self.form(request)
        action = str(form.get("action", ""))
        if action not in _ACTIONS:
            raise BadRequest(f"choose an action: one of {', '.join(_ACTIONS)}")
        value = str(form.get("value", "")).strip()
        if action != "forget" and not value:
            noun = "scope" if action == "move" else "tag"
            raise BadRequest(f"{_ACTIONS[action].lower()} needs a {noun}; type one in the box")
        apply_to = str(form.get("apply_to", "selected"))
        filters = Filters.read(form)
        if apply_to == "filter":
            ids = self.matching_ids(filters)
        elif apply_to == "selected":
            ids = [str(v) for v in form.getlist("ids")]
            if not ids:
                raise BadRequest(
                    "no memory is selected; tick some, or choose every memory the filter matches"
                )
        else:
            raise BadRequest("apply the action to the selected memories or to the filter")
        back = _local(form.get("next"), "/memories?" + filters.query_string())
        expected = str(form.get("expected", ""))
        if form.get("confirm") != "yes" or expected != str(len(ids)):
            keep = [
                (k, str(v))
                for k, v in form.multi_items()
                if k not in ("confirm", "expected", CSRF_FIELD, "next")
            ]
            return self.render(
                request,
                "confirm.html",
                action=action,
                value=value,
                count=len(ids),
                changed=bool(expected) and expected != str(len(ids)),
                hidden=keep,
                back=back,
                apply_to=apply_to,
            )
        engine = self.engine
        if not ids:
            return self.done("No memory matched; nothing was changed.", back)
        if action == "forget":
            n = engine.archive(ids, detail="forgotten in the inspector")
            message = f"Forgot {n} memories into the archive; restore them from the Archive page."
        elif action == "move":
            moved = engine.rescope(ids, value)
            message = f"Moved {len(moved)} memories to scope {value}."
        elif action == "tag":
            changed = engine.retag(ids, add=[value])
            message = f"Tagged {len(changed)} memories with {value}."
        else:
            changed = engine.retag(ids, remove=[value])
            message = f"Removed tag {value} from {len(changed)} memories."
        if action == "forget" and back.startswith("/memories/"):
            back = "/memories"
        return self.done(message, back)

    # -- one memory ----------------------------------------------------------

    def _lanes(self, record: Record, registries: dict[str, dict[str, int]]) -> dict[str, Any]:
        domain_prime, subdomain_prime, bucket, instance = unpack(record.address)
        by_prime = {
            kind: {prime: label for label, prime in table.items()}
            for kind, table in registries.items()
        }
        factors = [(registries.get("tag", {}).get(tag), tag) for tag in record.tags]
        known = [p for p, _ in factors if p is not None]
        product = math.prod(known) if known else 1
        return {
            "domain": (domain_prime, by_prime.get("domain", {}).get(domain_prime, "?")),
            "subdomain": (subdomain_prime, by_prime.get("subdomain", {}).get(subdomain_prime, "?")),
            "bucket": bucket,
            "instance": instance,
            "factors": sorted(factors, key=lambda f: f[0] or 0),
            "product_checks": product == record.tag_product,
        }

    def _check_citations(self, record: Record) -> tuple[CitationState, ...]:
        """The record's citations (live or archived) checked against the working tree now.

        A record that left between two reads (another process forgot and purged
        it) is checked from the fingerprints this page read.
        """
        try:
            return self.engine.citations(record.record_id)
        except NotFound:
            return cite_check.check(record.metadata.get(_CITES))

    def _citations(self, record: Record) -> list[dict[str, Any]]:
        """One row per citation: what was cited and stored, and its state now."""
        stored = record.metadata.get(_CITES)
        if not isinstance(stored, list):
            return []
        cites = [c for c in stored if isinstance(c, Mapping) and "path" in c]
        if not cites:
            return []
        states = self._check_citations(record)
        if len(states) != len(cites):  # a checker that skipped one: show what it found
            cites = [{"path": s.path} for s in states]
        rows = []
        for cite, state in zip(cites, states):
            commit = cite.get("commit")
            rows.append(
                {
                    "path": str(cite["path"]),
                    "lines": cite.get("lines"),
                    "symbol": cite.get("symbol"),
                    "commit": str(commit) if commit else None,
                    "state": state.state,
                    "now_path": state.path,
                    "now_lines": state.lines,
                    "detail": state.detail,
                }
            )
        return rows

    def _chain(self, record_id: str) -> Chain | None:
        """The record's validity chain when it has more than one version, else None."""
        try:
            chain = self.engine.chain(record_id)
        except NotFound:
            return None
        return chain if chain.predecessors or chain.successors else None

    def _possibly_supersedes(self, record: Record) -> list[dict[str, str]]:
        """The older memories a live one seems to restate with a changed value."""
        try:
            hints = self.engine.possibly_supersedes(record.record_id)
        except NotFound:
            return []  # archived: it supersedes nothing now
        return [{"id": hint.record.record_id, "change": hint.change} for hint in hints]

    def _history(self, record: Record) -> dict[str, Any]:
        """What the memory page shows of a record's citations, chain and candidates."""
        return {
            "citations": self._citations(record),
            "chain": self._chain(record.record_id),
            "possibly_supersedes": self._possibly_supersedes(record),
        }

    async def memory(self, request: Request) -> Response:
        return self._memory_page(request, request.path_params["record_id"])

    def _memory_page(
        self,
        request: Request,
        record_id: str,
        *,
        status: int = 200,
        error: str | None = None,
        edit: dict[str, str] | None = None,
    ) -> Response:
        engine = self.engine
        try:
            record = engine.get(record_id)
        except NotFound:
            return self._archived_page(request, record_id)
        rid = record.record_id
        decay = engine.decay(rid)
        reinforced = [record.accessed_at] if record.access_count and record.accessed_at else []
        curve = charts.decay_curve(
            strength=decay.strength,
            since=decay.since,
            half_life=decay.half_life,
            now=decay.now,
            created_at=record.created_at,
            reinforced_at=reinforced,
        )
        members = engine.archive_entries(record_id=rid, reason="folded", limit=200).entries
        listed = record.metadata.get("folded_from")
        folded_from = [str(m) for m in listed] if isinstance(listed, list) else []
        stats = engine.stats()
        form = edit or {
            "content": record.content,
            "tags": ", ".join(record.tags),
            "importance": f"{record.importance:g}",
            "scope": record.scope,
        }
        return self.render(
            request,
            "memory.html",
            status,
            record=record,
            live=True,
            decay=decay,
            curve=curve,
            lanes=self._lanes(record, stats.registries),
            members=[m for m in members if m.folded_into == rid],
            folded_from=folded_from,
            metadata=json.dumps(record.metadata, indent=2, sort_keys=True, ensure_ascii=False),
            form=form,
            error=error,
            scopes=stats.scopes,
            **self._history(record),
        )

    def _archived_page(self, request: Request, record_id: str) -> Response:
        rid = record_id.strip().lower()
        listing = self.engine.archive_entries(record_id=rid, limit=1_000)
        own = [e for e in listing.entries if e.record.record_id == rid]
        if not own:
            raise NotFound(
                f"no memory {rid}: it was never stored here, was forgotten for good, "
                "or was purged from the archive"
            )
        entry = own[0]
        return self.render(
            request,
            "memory.html",
            record=entry.record,
            live=False,
            entry=entry,
            lanes=self._lanes(entry.record, self.engine.stats().registries),
            members=[e for e in listing.entries if e.folded_into == rid and e.reason == "folded"],
            folded_from=[],
            metadata=json.dumps(
                entry.record.metadata, indent=2, sort_keys=True, ensure_ascii=False
            ),
            form=None,
            error=None,
            scopes={},
            **self._history(entry.record),
        )

    async def edit(self, request: Request) -> Response:
        form = await self.form(request)
        rid = request.path_params["record_id"]
        current = self.engine.get(rid)
        fields = {k: str(form.get(k, "")) for k in ("content", "tags", "importance", "scope")}
        changes: dict[str, Any] = {}
        try:
            if fields["content"] != current.content:
                changes["content"] = fields["content"]
            tags = tuple(t.strip() for t in fields["tags"].split(",") if t.strip())
            if tags != current.tags:
                changes["tags"] = tags
            try:
                importance = float(fields["importance"])
            except ValueError:
                raise InvalidInput(
                    f"importance must be a number from 0 to 1, got {fields['importance']!r}"
                ) from None
            if importance != current.importance:
                changes["importance"] = importance
            if fields["scope"].strip() != current.scope:
                changes["scope"] = fields["scope"].strip()
            if not changes:
                return self.done("Nothing changed.", f"/memories/{current.record_id}")
            self.engine.update(current.record_id, **changes)
        except InvalidInput as exc:
            return self._memory_page(
                request, current.record_id, status=400, error=str(exc), edit=fields
            )
        return self.done(
            f"Saved: {', '.join(sorted(changes))} changed.", f"/memories/{current.record_id}"
        )

    async def reinforce(self, request: Request) -> Response:
        await self.form(request)
        record = self.engine.reinforce(request.path_params["record_id"])
        return self.done(
            f"Reinforced; strength is now {record.strength:.3f}.", f"/memories/{record.record_id}"
        )

    async def unfold(self, request: Request) -> Response:
        form = await self.form(request)
        members = self.engine.unfold(request.path_params["record_id"])
        target = members[0].record_id if members else ""
        back = _local(form.get("next"), f"/memories/{target}")
        return self.done(f"Unfolded into {len(members)} memories again.", back)

    async def restore(self, request: Request) -> Response:
        form = await self.form(request)
        record = self.engine.restore(request.path_params["record_id"])
        back = _local(form.get("next"), f"/memories/{record.record_id}")
        return self.done("Restored from the archive.", back)

    # -- fold ----------------------------------------------------------------

    def _records(self, ids: Iterable[str]) -> dict[str, Record]:
        found: dict[str, Record] = {}
        for rid in ids:
            try:
                found[rid] = self.engine.get(rid)
            except NotFound:
                continue
        return found

    async def fold(self, request: Request) -> Response:
        report = self.engine.fold(dry_run=True)
        groups = []
        for created, members in report.folded_from.items():
            groups.append(
                {
                    "key": members[0],
                    "summary": report.summaries.get(created, ""),
                    "members": list(members),
                }
            )
        shown = self._records(
            [*report.pruned_ids, *report.stale_ids, *(m for g in groups for m in g["members"])]
        )
        return self.render(
            request,
            "fold.html",
            report=report,
            groups=groups,
            records=shown,
            prune_below=self.engine.fold_policy.prune_below,
        )

    async def fold_apply(self, request: Request) -> Response:
        form = await self.form(request)
        try:
            now = float(str(form.get("now", "")))
        except ValueError:
            raise BadRequest(
                "this fold form has no preview time; open the Fold page again"
            ) from None
        if not math.isfinite(now):
            raise BadRequest("this fold form's preview time is not a number; open it again")
        groups = [str(g) for g in form.getlist("group")]
        merge = {str(g) for g in form.getlist("merge")}
        apart = [g for g in groups if g not in merge]
        self.last_fold = self.engine.fold(now=now, keep_apart=apart)
        report = self.last_fold
        return self.done(
            f"Folded {report.folded} memories into {report.created}, archived {report.pruned}"
            + (f" and {report.stale} whose cited code changed" if report.stale else "")
            + "; "
            f"kept {len(apart)} group(s) apart.",
            "/fold/result",
        )

    async def fold_result(self, request: Request) -> Response:
        report = self.last_fold
        live: set[str] = set()
        records: dict[str, Record] = {}
        if report is not None:
            records = self._records([*report.created_ids, *report.pruned_ids, *report.stale_ids])
            live = set(records)
            for reason in ("pruned", "stale"):
                archived = self.engine.archive_entries(reason=reason, limit=1_000).entries
                for entry in archived:
                    records.setdefault(entry.record.record_id, entry.record)
        return self.render(request, "fold_result.html", report=report, records=records, live=live)

    # -- archive -------------------------------------------------------------

    async def archive(self, request: Request) -> Response:
        params = request.query_params
        reason = params.get("reason", "") or None
        contains = params.get("q", "").strip() or None
        try:
            page = int(params.get("page", "1") or "1")
            if page < 1:
                raise ValueError
        except ValueError:
            raise BadFilter(
                f"page must be a whole number from 1, got {params.get('page')!r}"
            ) from None
        size = 50
        listing = self.engine.archive_entries(
            reason=reason, contains=contains, limit=size, offset=(page - 1) * size
        )
        base = {"reason": reason or "", "q": contains or ""}
        return self.render(
            request,
            "archive.html",
            listing=listing,
            reason=reason or "",
            q=contains or "",
            page=page,
            pages=max(1, math.ceil(listing.total / size)),
            link=lambda p: "/archive?" + urlencode({**base, "page": p}),
            here=str(request.url.path) + ("?" + request.url.query if request.url.query else ""),
        )

    async def purge(self, request: Request) -> Response:
        form = await self.form(request)
        reason = str(form.get("reason", "")) or None
        if reason is not None and reason not in REASONS:
            raise BadRequest(f"reason must be {', '.join(REASONS)} or empty, got {reason!r}")
        count = self.engine.archive_entries(reason=reason, limit=0).total
        expected = str(form.get("expected", ""))
        if form.get("confirm") != "yes" or expected != str(count):
            return self.render(
                request,
                "confirm_purge.html",
                reason=reason or "",
                count=count,
                changed=bool(expected) and expected != str(count),
            )
        purged = self.engine.purge_archive(reason=reason)
        return self.done(f"Purged {purged} archived memories for good.", "/archive")

    # -- overview and live ---------------------------------------------------

    async def overview(self, request: Request) -> Response:
        engine = self.engine
        stats = engine.stats()
        profile = engine.profile()
        never = sorted(
            (
                (created, rid)
                for rid, created, count in zip(
                    profile.record_ids, profile.created_at, profile.access_count
                )
                if count == 0
            ),
        )
        return self.render(
            request,
            "overview.html",
            stats=stats,
            profile=profile,
            histogram=charts.histogram(profile.strength_now, title="Strength now"),
            timeline=charts.over_time(profile.created_at, title="Memories stored"),
            never_count=len(never),
            never=self._records(rid for _, rid in never[:20]),
            top_tags=sorted(stats.tags.items(), key=lambda kv: (-kv[1], kv[0]))[:30],
        )

    def _live_context(self, since: float | None) -> dict[str, Any]:
        page = self.engine.browse(scopes=["*"], order="newest", limit=25)
        newest = max((h.record.updated_at for h in page.hits), default=0.0)
        marker = newest if since is None else since
        return {"hits": page.hits, "total": page.total, "since": marker}

    async def live(self, request: Request) -> Response:
        return self.render(request, "live.html", **self._live_context(None))

    async def live_feed(self, request: Request) -> Response:
        try:
            since = float(request.query_params.get("since", ""))
        except ValueError:
            raise BadFilter("since must be a time in Unix seconds") from None
        if not math.isfinite(since):
            raise BadFilter("since must be a time in Unix seconds")
        return self.render(request, "_live.html", **self._live_context(since))

    async def home(self, request: Request) -> Response:
        return RedirectResponse("/overview", status_code=303)

    async def favicon(self, request: Request) -> Response:
        return Response(status_code=204)


def _error_handlers(inspector: Inspector) -> dict[Any, Any]:
    def page(request: Request, status: int, title: str, message: str) -> Response:
        if request.headers.get("hx-request"):
            return inspector.render(request, "_error_fragment.html", status, message=message)
        return inspector.render(request, "error.html", status, title=title, message=message)

    async def bad(request: Request, exc: Exception) -> Response:
        return page(request, 400, "That cannot be done", str(exc))

    async def missing(request: Request, exc: Exception) -> Response:
        message = exc.args[0] if exc.args else str(exc)
        return page(request, 404, "Not found", str(message))

    async def csrf(request: Request, exc: Exception) -> Response:
        return page(request, 403, "Form refused", str(exc))

    async def unavailable(request: Request, exc: Exception) -> Response:
        return page(request, 409, "Not available for this store", str(exc))

    async def http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            return page(request, 404, "Not found", "There is no page at this address.")
        if exc.status_code == 405:
            return page(request, 405, "Not allowed", "This address does not take that method.")
        return page(request, exc.status_code, "Refused", str(exc.detail))

    async def store(request: Request, exc: Exception) -> Response:
        return page(request, 500, "The store failed", str(exc))

    async def unexpected(request: Request, exc: Exception) -> Response:
        return page(
            request,
            500,
            "Unexpected error",
            f"{type(exc).__name__}: the inspector hit an error it did not expect; "
            "nothing partial was written. Its log holds the details.",
        )

    return {
        BadFilter: bad,
        BadRequest: bad,
        InvalidInput: bad,
        NotFound: missing,
        CsrfError: csrf,
        NotAvailable: unavailable,
        PrimeMemoryError: store,
        HTTPException: http,
        Exception: unexpected,
    }


class _Headers:
    """Adds the security headers to every response."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [
                    (k.lower().encode(), v.encode())
                    for k, v in _SECURITY_HEADERS.items()
                    if k.lower().encode() not in present
                ]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, with_headers)


def create_app(engine: MemoryEngine, keys: Secrets, hosts: Sequence[str]) -> Any:
    """The inspector as an ASGI app: every request must pass :class:`~.security.Guard`.

    Args:
        engine: the store to show; the app never closes it.
        keys: the token that opens the inspector and the CSRF token of its forms.
        hosts: the ``Host`` header values to answer (see :func:`~.security.allowed_hosts`).
    """
    inspector = Inspector(engine, keys)
    rid = "{record_id}"
    routes = [
        Route("/", inspector.home),
        Route("/favicon.ico", inspector.favicon),
        Route("/overview", inspector.overview),
        Route("/memories", inspector.memories),
        Route("/memories/bulk", inspector.bulk, methods=["POST"]),
        Route(f"/memories/{rid}", inspector.memory),
        Route(f"/memories/{rid}/edit", inspector.edit, methods=["POST"]),
        Route(f"/memories/{rid}/reinforce", inspector.reinforce, methods=["POST"]),
        Route(f"/memories/{rid}/unfold", inspector.unfold, methods=["POST"]),
        Route("/fold", inspector.fold),
        Route("/fold/apply", inspector.fold_apply, methods=["POST"]),
        Route("/fold/result", inspector.fold_result),
        Route("/archive", inspector.archive),
        Route("/archive/purge", inspector.purge, methods=["POST"]),
        Route(f"/archive/{rid}/restore", inspector.restore, methods=["POST"]),
        Route("/live", inspector.live),
        Route("/live/feed", inspector.live_feed),
        Mount("/static", app=StaticFiles(directory=_STATIC), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers=_error_handlers(inspector))
    app.state.inspector = inspector
    return _Headers(Guard(app, keys, hosts))
