"""The edits ``--write`` allows: one Brain call each, results in the tool layer's shapes.

Read-only mode refuses every action before touching the brain (and the brain is
opened read-only as well, so a missed check still cannot write).
"""

from __future__ import annotations

import threading
from typing import Any

from ..errors import InvalidInput, ReadOnlyBrain
from .app import ReflectJob, UiError, UiState


def require_write(state: UiState) -> None:
    if not state.write:
        raise ReadOnlyBrain("the inspector is read-only; start it with `brainmem ui --write` to edit")


def pin(state: UiState, trace_id: str, pinned: bool) -> dict[str, Any]:
    require_write(state)
    trace = state.writer.pin(trace_id) if pinned else state.writer.unpin(trace_id)
    return {"updated": True, "version": trace.version, "pinned": trace.pinned}


def delete(state: UiState, trace_id: str) -> dict[str, Any]:
    require_write(state)
    if not state.writer.delete(trace_id):
        state.writer.get(trace_id, include_deleted=True)  # NotFound for an unknown id
        raise InvalidInput(f"trace {trace_id} is already deleted")
    return {"deleted": True}


def restore(state: UiState, trace_id: str) -> dict[str, Any]:
    require_write(state)
    trace = state.writer.restore(trace_id)
    return {"restored": True, "version": trace.version}


def can_unmerge(state: UiState) -> bool:
    """Whether this build's Brain has ``unmerge`` (and the inspector may write)."""
    return state.write and hasattr(state.writer, "unmerge")


def unmerge(state: UiState, trace_id: str) -> dict[str, Any]:
    """Undo the merges into a trace; the ``memory_unmerge`` tool's result shape."""
    require_write(state)
    if not can_unmerge(state):
        raise InvalidInput("this brainmem has no unmerge")
    result = state.writer.unmerge(trace_id)
    return {"restored": result["restored"], "merged_trace_deleted": result["merged_trace_deleted"]}


def parse_tags(text: str) -> list[str]:
    """Tags from the form's comma-separated text."""
    return [t.strip() for t in text.split(",") if t.strip()]


def tags_text(tags: list[str]) -> str:
    """The edit form's text of ``tags`` (what :func:`parse_tags` reads back)."""
    return ", ".join(tags)


def form_changes(state: UiState, trace_id: str, content: str, tags: str | None) -> dict[str, Any]:
    """The fields the edit form changed, against the trace it shows: a browser sends the
    textarea's line breaks as CRLF and the tags as their comma-joined text (a tag may hold
    a comma), so a field left as shown is left out rather than rewritten."""
    require_write(state)
    current = state.writer.get(trace_id)
    changes: dict[str, Any] = {}
    if content.replace("\r\n", "\n") != current.content.replace("\r\n", "\n"):
        changes["content"] = content.replace("\r\n", "\n")
    if tags is not None and tags != tags_text(current.tags) and parse_tags(tags) != current.tags:
        changes["tags"] = parse_tags(tags)
    return changes


def edit(state: UiState, trace_id: str, changes: dict[str, Any]) -> dict[str, Any]:
    """``memory_update``'s result; ``expected_version`` is required (optimistic editing)."""
    require_write(state)
    expected = changes.pop("expected_version", None)
    if isinstance(expected, str):
        try:
            expected = int(expected)
        except ValueError:
            raise InvalidInput(f"expected_version must be a whole number, not {expected[:40]!r}") from None
    if expected is None:
        raise InvalidInput("an edit needs expected_version (the version you are editing)")
    unknown = set(changes) - {"content", "tags"}
    if unknown:
        raise InvalidInput(f"the inspector edits content and tags only, not {', '.join(sorted(unknown))}")
    trace = state.writer.update(trace_id, expected_version=expected, **changes)
    return {"updated": True, "version": trace.version}


def start_reflect(state: UiState) -> dict[str, Any]:
    """Run reflect in a background thread; its progress is in ``state.reflect``."""
    require_write(state)
    job = state.reflect
    with job.lock:
        if job.running:
            raise UiError(409, "A reflect is already running.")
        job.step, job.done, job.total, job.report, job.error = "starting", 0, 0, None, None

        def progress(step: str, done: int, total: int) -> None:
            job.step, job.done, job.total = step, done, total

        def work() -> None:
            try:
                job.report = state.writer.reflect(progress=progress).to_tool()
            except Exception as exc:  # shown on the page; the brain rolled the step back
                job.error = f"{type(exc).__name__}: {exc}"
            finally:
                job.step = "done"

        job.thread = threading.Thread(target=work, name="brainmem-ui-reflect")
        job.thread.start()
    return job.view()


def reflect_status(job: ReflectJob) -> dict[str, Any]:
    return job.view()
