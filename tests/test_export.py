"""Export to JSON Lines and import back (issue 5): lossless, validated first, all or nothing."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brainmem import Brain, InvalidInput
from brainmem.cli import main
from brainmem.model import has_visible
from brainmem.schema import SCHEMA_VERSION


def export_text(brain: Brain, **kw) -> str:
    out = io.StringIO()
    brain.export(out, **kw)
    return out.getvalue()


def populate(brain: Brain, clock) -> dict[str, str]:
    a = brain.add("Alice likes green tea", tags=["pref"], episode="e1", importance=0.9,
                  metadata={"source": "chat", "n": [1, 2]})
    clock.advance(5)
    b = brain.add("Alice moved to Lisbon", episode="e1", type="semantic")
    k = brain.put("user.city", "Lisbon", scope="thread", scope_id="th-1", ttl=3600)
    r = brain.add("Water the plants", type="prospective", due_at=clock.now + 60, cue="garden")
    w = brain.add("scratch note", type="working", task_id="task-9")
    brain.update(b.id, content="Alice moved to Porto")  # leaves a snapshot + supersedes edge
    gone = brain.add("to be deleted")
    brain.delete(gone.id)
    brain.search("Alice")  # reinforcement changes strength/stability/access counts
    return {"a": a.id, "b": b.id, "k": k.id, "r": r.id, "w": w.id, "gone": gone.id}


def trace_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith('{"trace"')]


def test_format_header_traces_edges(mem_brain: Brain, clock) -> None:
    populate(mem_brain, clock)
    lines = export_text(mem_brain).splitlines()
    header = json.loads(lines[0])
    assert header["brainmem"] and header["schema"] == SCHEMA_VERSION
    assert header["traces"] == 5 and header["edges"] == 1  # live only: episode_next a->b
    kinds = [next(iter(json.loads(line))) for line in lines[1:]]
    assert kinds == ["trace"] * 5 + ["edge"]
    first = json.loads(lines[1])["trace"]
    assert first["metadata"] == {"source": "chat", "n": [1, 2]} and first["tags"] == ["pref"]
    full = export_text(mem_brain, include_deleted=True).splitlines()
    assert json.loads(full[0])["traces"] == 7 and json.loads(full[0])["edges"] == 2


def test_round_trip_is_lossless(brain_factory, tmp_path: Path, clock) -> None:
    source = brain_factory(tmp_path / "a.db")
    populate(source, clock)
    path = tmp_path / "dump.jsonl"
    counts = source.export(path, include_deleted=True)
    assert counts == {"traces": 7, "edges": 2}
    target = brain_factory(tmp_path / "b.db")
    report = target.import_jsonl(path)
    assert (report.imported, report.skipped, report.edges) == (7, 0, 2)
    assert report.id_map == {}
    assert export_text(target, include_deleted=True) == path.read_text(encoding="utf-8")
    # the index is in sync: search and keys work on the imported brain
    assert target.search("Porto", reinforce=False)[0].trace.content == "Alice moved to Porto"
    assert [h.trace.key for h in target.search("Lisbon", reinforce=False)] == ["user.city"]
    assert target.get_key("user.city", scope="thread", scope_id="th-1").content == "Lisbon"
    assert target.check()["ok"]


def test_import_twice_and_dedup_by_content(mem_brain: Brain, clock, tmp_path: Path) -> None:
    ids = populate(mem_brain, clock)
    text = export_text(mem_brain)
    again = mem_brain.import_jsonl(io.StringIO(text))
    assert (again.imported, again.skipped) == (0, 5)  # same ids: already there
    with Brain(":memory:", clock=clock) as other:
        mine = other.add("Alice likes green tea", tags=["pref"])  # same content, type and scope
        report = other.import_jsonl(io.StringIO(text))
        assert report.skipped == 1 and report.imported == 4
        assert report.id_map == {ids["a"]: mine.id}
        # the edge a->b follows the mapping onto the existing trace
        edges = list(other._store.execute("SELECT src, dst, kind FROM edges"))
        assert edges == [(mine.id, ids["b"], "episode_next")]


def test_import_new_ids_remaps_edges_and_merged_into(mem_brain: Brain, clock) -> None:
    populate(mem_brain, clock)
    text = export_text(mem_brain, include_deleted=True)
    with Brain(":memory:", clock=clock) as other:
        report = other.import_jsonl(io.StringIO(text), new_ids=True)
        assert report.imported == 7 and len(report.id_map) == 7
        assert not set(report.id_map) & set(report.id_map.values())
        new_ids = set(report.id_map.values())
        for src, dst in other._store.execute("SELECT src, dst FROM edges"):
            assert src in new_ids and dst in new_ids
        snapshots = [json.loads(line)["trace"] for line in trace_lines(export_text(other, include_deleted=True))
                     if json.loads(line)["trace"]["merged_into"]]
        assert snapshots and all(s["merged_into"] in new_ids for s in snapshots)


def test_import_key_conflict_imports_nothing(mem_brain: Brain, clock) -> None:
    populate(mem_brain, clock)
    text = export_text(mem_brain)
    with Brain(":memory:", clock=clock) as other:
        other.put("user.city", "Madrid", scope="thread", scope_id="th-1")
        with pytest.raises(InvalidInput, match=r"line \d+: key 'user.city'"):
            other.import_jsonl(io.StringIO(text))
        assert other.stats()["live"] == 1


def bad_files(good: str) -> list[tuple[str, str]]:
    lines = good.splitlines(keepends=True)
    trace = json.loads(lines[2])
    wrong_type = json.dumps({"trace": {**trace["trace"], "type": "dream"}}) + "\n"
    no_content = json.dumps({"trace": {**trace["trace"], "content": ""}}) + "\n"
    extra_field = json.dumps({"trace": {**trace["trace"], "colour": "red"}}) + "\n"
    dangling = json.dumps({"edge": {"src": "mt_x", "dst": trace["trace"]["id"], "kind": "co_activated",
                                    "weight": 0.5, "updated_at": 1.0}}) + "\n"
    return [
        ("".join(lines)[:-15], rf"line {len(lines)}: not valid JSON \(the file looks truncated\)"),
        ("".join(lines[:3] + ["{not json}\n"] + lines[3:]), r"line 4: not valid JSON"),
        ("".join(lines[:2] + [wrong_type] + lines[3:]), r"line 3: unknown type 'dream'"),
        ("".join(lines[:2] + [no_content] + lines[3:]), r"line 3: content must not be empty"),
        ("".join(lines[:2] + [extra_field] + lines[3:]), r"line 3: unknown trace field\(s\): colour"),
        ("".join(lines[:-1] + [dangling]), rf"line {len(lines)}: edge end mt_x"),
        ("".join(lines[:2] + [lines[2]] + lines[2:]), r"line 4: trace id .* appears twice"),
        ("".join(lines[:-1]), r"header promises 1 edges but the file has 0"),
        ("".join(lines[1:]), r"line 1: the first line must be the header"),
        ("", r"no brainmem header"),
        ("".join([json.dumps({"brainmem": "9", "schema": SCHEMA_VERSION + 1}) + "\n"]),
         r"line 1: .*newer than this brainmem"),
        ("".join(lines[:2] + ['{"trace": {}, "edge": {}}\n'] + lines[2:]), r"line 3: expected"),
    ]


def test_bad_import_files_name_the_line_and_import_nothing(mem_brain: Brain, clock,
                                                          tmp_path: Path) -> None:
    populate(mem_brain, clock)
    good = export_text(mem_brain)
    for number, (text, message) in enumerate(bad_files(good)):
        with Brain(str(tmp_path / f"t{number}.db"), clock=clock) as target:
            target.add("already here")
            path = tmp_path / f"bad{number}.jsonl"
            path.write_text(text, encoding="utf-8")
            with pytest.raises(InvalidInput, match=message):
                target.import_jsonl(path)
            assert target.stats()["live"] == 1 and target.stats()["deleted"] == 0
            assert list(target._store.execute("SELECT count(*) FROM edges"))[0][0] == 0


def test_import_missing_file_is_invalid_input(mem_brain: Brain, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot read"):
        mem_brain.import_jsonl(tmp_path / "nope.jsonl")


def test_export_to_path_is_atomic_and_overwrites(mem_brain: Brain, tmp_path: Path) -> None:
    mem_brain.add("one")
    path = tmp_path / "out.jsonl"
    path.write_text("old contents")
    mem_brain.export(path)
    assert path.read_text().startswith('{"brainmem"')
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]  # no temp file left


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_export_keeps_the_mode_of_the_file_it_replaces_and_the_umask_of_a_new_one(
        mem_brain: Brain, tmp_path: Path) -> None:
    # the temporary file it is written to is private (0600), and became the export: a new
    # export unreadable by the group the umask lets read, a re-export of a file made
    # readable (`chmod 644`, for a web server, a sync job) private again
    mem_brain.add("one")
    shared = tmp_path / "shared.jsonl"
    shared.write_text("old contents")
    shared.chmod(0o644)
    mem_brain.export(shared)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o644
    old = os.umask(0o027)
    try:
        mem_brain.export(tmp_path / "new.jsonl")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.jsonl").stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.jsonl", "shared.jsonl"]


def test_export_never_writes_over_a_brain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: `brainmem --brain b.db export b.db` (a slip for b.jsonl) moved the export over
    # the brain itself, and exporting onto another brain's file replaced that brain: every
    # trace not exported (deleted ones, snapshots), the graph's state, retrievals and
    # vectors were gone, and the brain's WAL was left pointing at a JSON file.
    path = tmp_path / "b.db"
    other = tmp_path / "other.db"
    with Brain(str(other)) as second:
        second.add("another brain's memory")
    brain = Brain(str(path))
    brain.add("precious memory")
    kept = {p: p.read_bytes() for p in (other,)}
    for target in (path, other, Path(f"{path}-wal")):
        with pytest.raises(InvalidInput, match="SQLite"):
            brain.export(target)
    assert other.read_bytes() == kept[other]
    brain.close()
    assert main(["--brain", str(path), "export", str(path)]) == 2
    assert "SQLite" in capsys.readouterr().err
    with Brain(str(path)) as again:
        assert again.check()["ok"] and [h.trace.content for h in again.search("precious")] == ["precious memory"]
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm"))) == ["b.db", "other.db"]


def test_import_emits_add_events(mem_brain: Brain, clock) -> None:
    populate(mem_brain, clock)
    text = export_text(mem_brain, include_deleted=True)
    with Brain(":memory:", clock=clock) as other:
        events: list[str] = []
        other.subscribe(lambda kind, payload: events.append(kind))
        other.import_jsonl(io.StringIO(text))
        assert events == ["add"] * 5  # live traces only; deleted history is not news


texts = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40).filter(
    has_visible
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=st.lists(st.fixed_dictionaries({
    "content": texts,
    "type": st.sampled_from(["episodic", "semantic", "procedural", "prospective", "working"]),
    "tags": st.lists(texts.map(str.strip).filter(bool), max_size=3),
    "importance": st.floats(0, 1),
    "metadata": st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=2),
    "episode": st.none() | st.sampled_from(["e1", "e2"]),
    "created_at": st.floats(1e9, 2e9),
}), min_size=1, max_size=8), delete_first=st.booleans(), merge_two=st.booleans())
@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_round_trip_property(items, delete_first: bool, merge_two: bool, tmp_path_factory) -> None:
    with Brain(":memory:", clock=lambda: 2e9) as source:
        traces = source.add_many(items)
        ids = list(dict.fromkeys(t.id for t in traces))
        if merge_two and len(ids) > 2:  # merged_into points forward, to a later line
            source.merge(ids[1:3])
        if delete_first:
            source.delete(traces[0].id)
        text = export_text(source, include_deleted=True)
    with Brain(":memory:", clock=lambda: 2e9) as target:
        target.import_jsonl(io.StringIO(text))
        assert export_text(target, include_deleted=True) == text


def test_export_and_backup_are_synced_to_disk_before_they_count(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The rename that makes an export or a backup was not synced: a power cut after it
    could leave the folder without the new file (or the export's data unwritten)."""
    import os
    import stat

    synced: list[tuple[bool, int]] = []  # (a folder?, inode)
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        st = os.fstat(fd)
        synced.append((stat.S_ISDIR(st.st_mode), st.st_ino))
        real_fsync(fd)

    out = tmp_path / "out"
    out.mkdir()
    with Brain(str(tmp_path / "b.db")) as brain:
        brain.add("the user's bike is blue")
        monkeypatch.setattr(os, "fsync", fsync)
        brain.export(str(out / "brain.jsonl"))
        export_synced, synced[:] = list(synced), []
        brain.backup(str(out / "copy.db"))
    folder = out.stat().st_ino
    assert (False, (out / "brain.jsonl").stat().st_ino) in export_synced  # the data, before the rename
    assert export_synced[-1] == (True, folder)                            # the folder, after it
    assert synced[-1] == (True, folder)


def test_import_treats_an_expired_trace_in_the_brain_as_absent(mem_brain: Brain, clock) -> None:
    """An imported memory was mapped onto the brain's expired copy of it (and so never
    seen), and a key whose value in the brain had expired refused the import."""
    with Brain(":memory:", clock=clock) as source:
        source.add("one-time code 4821 was used")
        source.put("session", "new token")
        text = export_text(source)
    mem_brain.add("one-time code 4821 was used", ttl=60)
    mem_brain.put("session", "old token", ttl=60)
    clock.advance(120)
    deleted: list[str] = []
    mem_brain.subscribe(lambda kind, payload: deleted.append(payload.get("reason")), kinds=["delete"])
    report = mem_brain.import_jsonl(io.StringIO(text))
    assert (report.imported, report.skipped, report.id_map) == (2, 0, {})
    assert [h.trace.content for h in mem_brain.search("code 4821", reinforce=False)] == [
        "one-time code 4821 was used"]
    assert mem_brain.get_key("session").content == "new token"
    assert deleted == ["expired", "expired"]  # as an add or a put would have swept them
    assert mem_brain.stats()["expired"] == 0 and mem_brain.check()["ok"]


def test_import_new_ids_keeps_merges_undoable(mem_brain: Brain, clock) -> None:
    """With new ids, the merge records (``metadata``) still named the file's ids: unmerge
    of an imported merge said "not the result of a merge", and its edges were lost."""
    first = mem_brain.add("Dinner at pizza place friday", episode="e")
    second = mem_brain.add("Dinner at the pizza place on friday", episode="e")
    mem_brain.add("Paid the bill", episode="e")
    merged = mem_brain.merge([first.id, second.id])
    mem_brain.add("Carol watches comedy series on netflix")
    mem_brain.add("Carol watches comedy series on netflix thanks")
    mem_brain.put("user.city", "Lisbon")
    mem_brain.put("user.city", "Porto")  # a snapshot naming the live value
    clock.advance(86_400)
    assert mem_brain.reflect().merged == 1
    survivor = next(t for t in mem_brain.list(limit=100).items if "netflix" in t.title).id
    text = export_text(mem_brain, include_deleted=True)
    with Brain(":memory:", clock=clock) as other:
        report = other.import_jsonl(io.StringIO(text), new_ids=True)
        assert not any(old in export_text(other, include_deleted=True) for old in report.id_map)
        undone = other.unmerge(report.id_map[merged.id])
        assert sorted(undone["restored"]) == sorted(report.id_map[i] for i in (first.id, second.id))
        assert other.unmerge(report.id_map[survivor])["by"] == "reflect"
        assert other.check()["ok"]
        again = export_text(other, include_deleted=True)
    # the same as undoing them in the brain they came from, but for the ids
    assert mem_brain.unmerge(merged.id)["edges_restored"] == undone["edges_restored"] > 0
    mem_brain.unmerge(survivor)
    mine = export_text(mem_brain, include_deleted=True)
    for old, new in report.id_map.items():
        mine = mine.replace(old, new)
    assert sorted(mine.splitlines()) == sorted(again.splitlines())


def test_import_onto_a_copy_keeps_the_memory_as_long_as_the_file_does(mem_brain: Brain, clock) -> None:
    """A memory pinned (or kept forever) in the file, skipped because the brain held it
    unpinned (or expiring), lost its pin (or vanished at the brain copy's expiry)."""
    with Brain(":memory:", clock=clock) as source:
        source.add("The user's passport number is X123", pinned=True)
        source.add("The user is allergic to penicillin")
        source.add("The user likes jazz", ttl=30)
        text = export_text(source)
    pinned = mem_brain.add("The user's passport number is X123")
    lasting = mem_brain.add("The user is allergic to penicillin", ttl=60)
    jazz = mem_brain.add("The user likes jazz")
    report = mem_brain.import_jsonl(io.StringIO(text))
    assert (report.imported, report.skipped) == (0, 3)
    assert mem_brain.get(pinned.id).pinned
    clock.advance(120)
    assert mem_brain.get(lasting.id).expires_at is None
    assert mem_brain.get(jazz.id).expires_at is None  # never shortened, as an add


def test_import_of_an_expired_value_does_not_conflict_with_the_brain_key(mem_brain: Brain, clock) -> None:
    """A value that had expired in the file (invisible there) refused the whole import
    because the brain held its key with another value."""
    with Brain(":memory:", clock=clock) as source:
        source.put("session", "old token", ttl=60)
        source.add("The user likes jazz")
        clock.advance(120)
        text = export_text(source)
    mem_brain.put("session", "new token")
    report = mem_brain.import_jsonl(io.StringIO(text))
    assert report.imported == 2
    assert mem_brain.get_key("session").content == "new token"
    old = [t for t in mem_brain.read([json.loads(line)["trace"]["id"] for line in trace_lines(text)],
                                     include_deleted=True).traces if t.key == "session"]
    assert old and old[0].deleted_at is not None and old[0].metadata["deleted_reason"] == "expired"
    assert mem_brain.check()["ok"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=50, deadline=None)
@given(tags=st.lists(st.text(min_size=1, max_size=5), max_size=3),
       metadata=st.dictionaries(st.text(max_size=5), json_values, max_size=4),
       deleted=st.none() | st.floats(1e9, 2e9), merged=st.none() | st.just("mt_x"))
def test_trace_fields_is_what_asdict_gives_without_copying(tags, metadata, deleted, merged) -> None:
    """Export serialised each trace through ``dataclasses.asdict`` (a deep copy of every
    field, ~70 % of an export's time); ``Trace.as_fields`` gives the same dict, uncopied."""
    from dataclasses import asdict

    from brainmem.model import Trace

    trace = Trace(id="mt_1", content="c", content_hash="h", tags=tags, metadata=metadata,
                  deleted_at=deleted, merged_into=merged, valid_from=1.5, cue="q")
    view = trace.as_fields()
    assert view == asdict(trace) and list(view) == list(asdict(trace))
    assert view["metadata"] is trace.metadata and view["tags"] is trace.tags  # no copy


def test_export_does_not_deep_copy_traces(mem_brain: Brain, clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every field of every trace (snapshots, deleted, nested metadata) is exported as
    ``asdict`` would give it, without calling it."""
    import dataclasses

    from brainmem.model import Trace

    populate(mem_brain, clock)
    mem_brain.add("deep", metadata={"a": {"b": [1, {"c": None}], "d": 1.5}, "e": []})
    expected = [json.dumps({"trace": dataclasses.asdict(t)}, ensure_ascii=False, sort_keys=True,
                           separators=(",", ":"), allow_nan=False)
                for t in mem_brain._store.iter_traces(include_deleted=True)]

    def refuse(*_a, **_k):
        raise AssertionError("export deep-copied a trace")

    monkeypatch.setattr(dataclasses, "asdict", refuse)
    monkeypatch.setattr(Trace, "to_dict", refuse)
    assert trace_lines(export_text(mem_brain, include_deleted=True)) == expected


def test_an_export_saved_with_a_byte_order_mark_imports(brain_factory, tmp_path: Path) -> None:
    # Windows editors (Notepad, Excel's CSV/UTF-8) save UTF-8 with a BOM: the export was
    # refused ("Unexpected UTF-8 BOM (decode using utf-8-sig)") after a mere re-save
    source = brain_factory(tmp_path / "a.db")
    trace = source.add("東京 café 🎉")
    text = io.StringIO()
    source.export(text)
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + text.getvalue().encode("utf-8"))
    target = brain_factory(tmp_path / "b.db")
    assert target.import_jsonl(path).imported == 1
    assert target.get(trace.id).content == trace.content
    other = brain_factory(tmp_path / "c.db")
    assert other.import_jsonl(io.StringIO("\ufeff" + text.getvalue())).imported == 1
