"""The everyday faces (issue 5) through the public API: key-value, list/read, recent,
subscriptions, TTL, pinning, quotas, optimistic concurrency, working and prospective memory."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from conftest import statements_run

from brainmem import Brain, InvalidInput, NotFound, Policy, QuotaExceeded, VersionConflict
from brainmem.validate import LIMIT_MAX, READ_MAX


def fts_count(brain: Brain, word: str) -> int:
    return brain._store.execute("SELECT count(*) FROM traces_fts WHERE traces_fts MATCH ?", (word,)).get


# --- key-value face ---------------------------------------------------------------------


def test_put_inserts_then_overwrites_in_place(mem_brain: Brain) -> None:
    first = mem_brain.put("user.theme", "dark mode please", tags=["ui"])
    assert (first.key, first.version, first.type) == ("user.theme", 1, "semantic")
    second = mem_brain.put("user.theme", "light mode now")
    assert second.id == first.id and second.version == 2
    assert second.tags == ["ui"]  # fields not given keep their values
    assert mem_brain.get_key("user.theme").content == "light mode now"
    # the index follows the overwrite: old words are gone from live search, new ones found
    assert fts_count(mem_brain, "dark") == 0 and fts_count(mem_brain, "light") == 1
    assert [h.trace.id for h in mem_brain.search("light", reinforce=False)] == [first.id]
    assert not mem_brain.search("dark", reinforce=False)
    # the old value survives as a soft-deleted snapshot (no update loses a byte)
    assert mem_brain.stats()["deleted"] == 1


def test_keys_are_per_scope_and_not_deduplicated(mem_brain: Brain) -> None:
    a = mem_brain.put("k", "same value", scope="thread", scope_id="t1")
    b = mem_brain.put("k", "same value", scope="thread", scope_id="t2")
    c = mem_brain.put("other", "same value", scope="thread", scope_id="t1")
    assert len({a.id, b.id, c.id}) == 3
    assert mem_brain.get_key("k", scope="thread", scope_id="t2").id == b.id
    with pytest.raises(NotFound):
        mem_brain.get_key("k")  # default scope user/''
    # add with a key is idempotent for the same value, refuses another value
    assert mem_brain.add("same value", scope="thread", scope_id="t1", key="k", type="semantic").id == a.id
    with pytest.raises(InvalidInput, match="already used"):
        mem_brain.add("different", scope="thread", scope_id="t1", key="k")


def test_delete_key_and_get_key_absent(mem_brain: Brain) -> None:
    mem_brain.put("k", "v")
    assert mem_brain.delete_key("k") is True
    assert mem_brain.delete_key("k") is False
    with pytest.raises(NotFound, match="no value for key 'k'"):
        mem_brain.get_key("k")
    again = mem_brain.put("k", "v2")  # the slot is free again
    assert again.version == 1


@pytest.mark.parametrize("key", ["", "   ", "x" * 257, 12, None])
def test_bad_keys_are_refused_and_nothing_changes(mem_brain: Brain, key: object) -> None:
    with pytest.raises(InvalidInput, match="key"):
        mem_brain.put(key, "value")  # type: ignore[arg-type]
    assert mem_brain.stats()["live"] == 0


def test_key_limit_follows_policy(clock) -> None:
    with Brain(":memory:", clock=clock, policy=replace(Policy(), max_key_chars=8)) as brain:
        brain.put("12345678", "fits")
        with pytest.raises(InvalidInput, match="limit of 8"):
            brain.put("123456789", "too long")


def test_put_retention_keeps_last_lines_or_chars(mem_brain: Brain) -> None:
    log = "".join(f"line {i}\n" for i in range(10))
    assert mem_brain.put("log", log, keep_lines=3).content == "line 7\nline 8\nline 9\n"
    assert mem_brain.put("tail", "abcdefghij", keep_chars=4).content == "ghij"
    both = mem_brain.put("both", "aaa\nbbbbbb\ncc", keep_lines=2, keep_chars=5)
    assert both.content == "bb\ncc"
    for bad in ({"keep_lines": 0}, {"keep_chars": -1}, {"keep_lines": 1.5}):
        with pytest.raises(InvalidInput):
            mem_brain.put("bad", "x", **bad)


def test_put_version_conflict_changes_nothing(mem_brain: Brain) -> None:
    t = mem_brain.put("k", "one")
    mem_brain.put("k", "two", expected_version=1)
    with pytest.raises(VersionConflict) as err:
        mem_brain.put("k", "three", expected_version=1)
    assert err.value.current == 2
    assert mem_brain.get_key("k").content == "two"
    with pytest.raises(VersionConflict):
        mem_brain.put("k", "three", expected_version=0)  # 0: only if absent
    created = mem_brain.put("new", "fresh", expected_version=0)
    assert created.version == 1
    with pytest.raises(VersionConflict):
        mem_brain.put("absent", "x", expected_version=3)
    with pytest.raises(VersionConflict):
        mem_brain.update(t.id, content="four", expected_version=1)
    assert mem_brain.get(t.id).content == "two"


def test_put_with_ttl_and_expired_key_counts_as_absent(mem_brain: Brain, clock) -> None:
    t = mem_brain.put("session", "token-1", ttl=60)
    assert mem_brain.get_key("session").id == t.id
    clock.advance(61)
    with pytest.raises(NotFound):
        mem_brain.get_key("session")
    fresh = mem_brain.put("session", "token-2", ttl=60, expected_version=0)
    assert fresh.id != t.id and fresh.version == 1
    old = mem_brain.read([t.id], include_deleted=True).traces[0]
    assert old.deleted_at is not None and old.metadata["deleted_reason"] == "expired"
    for bad in (0, -5, float("nan"), True, "60"):
        with pytest.raises(InvalidInput, match="ttl"):
            mem_brain.put("bad", "x", ttl=bad)
    with pytest.raises(InvalidInput, match="ttl"):
        mem_brain.add("x", ttl=0)
    with pytest.raises(InvalidInput, match="not both"):
        mem_brain.put("bad", "x", ttl=5, expires_at=clock.now + 5)


def test_an_expired_key_is_free_for_add_and_update_as_for_put(file_brain: Brain, clock) -> None:
    # get_key and put count an expired value as absent; add(key=) and update(key=)
    # refused the key as "already used" until reflect pruned the expired trace
    old = file_brain.put("session", "token-1", ttl=60)
    clock.advance(61)
    with pytest.raises(NotFound):
        file_brain.get_key("session")
    added = file_brain.add("token-2", key="session")
    assert added.id != old.id and file_brain.get_key("session").id == added.id
    gone = file_brain.read([old.id], include_deleted=True).traces[0]
    assert gone.deleted_at is not None and gone.metadata["deleted_reason"] == "expired"

    other = file_brain.put("lease", "lease-1", ttl=60)
    clock.advance(61)
    moved = file_brain.update(file_brain.add("lease-2").id, key="lease")
    assert file_brain.get_key("lease").id == moved.id != other.id
    result = file_brain.call_tool("memory_add", {"content": "x", "key": "session"})
    assert result["error"]["type"] == "InvalidInput"  # a live key still refuses


def test_key_prefix_matches_keys_holding_nul_and_astral_characters(file_brain: Brain) -> None:
    # substr() on TEXT stops at a NUL, so a prefix holding one matched no key, not even itself
    for key in ("a\x00b", "a\x00c", "ab", "🔑.x", "🔑y", "é.x", "e\u0301.y"):
        file_brain.put(key, f"value of {key!r}")
    keys = lambda prefix: sorted(i.key for i in file_brain.list(key_prefix=prefix).items)  # noqa: E731
    assert keys("a\x00b") == ["a\x00b"]
    assert keys("a\x00") == ["a\x00b", "a\x00c"]
    assert keys("a") == ["a\x00b", "a\x00c", "ab"]
    assert keys("a\x00bc") == [] and keys("b") == []
    assert keys("🔑") == ["🔑.x", "🔑y"] and keys("🔑.") == ["🔑.x"]
    assert keys("é") == ["é.x"] and keys("e") == ["e\u0301.y"]  # exact code points, no normalisation
    result = file_brain.call_tool("memory_list", {"key_prefix": "a\x00"}, extra="all")
    assert sorted(i["key"] for i in result["items"]) == ["a\x00b", "a\x00c"]


# --- list, read, recent -----------------------------------------------------------------


def test_list_returns_metadata_newest_first(mem_brain: Brain, clock) -> None:
    first = mem_brain.add("First line of a long note " + "x" * 100 + "\nsecond line", tags=["a"])
    clock.advance(1)
    second = mem_brain.add("\n  héllo   world  ", tags=["a", "b"], type="semantic")
    listing = mem_brain.list()
    assert [i.id for i in listing.items] == [second.id, first.id]
    assert not listing.truncated
    top = listing.items[1]
    assert top.title.startswith("First line of a long note") and len(top.title) == 80
    assert top.title.endswith("…")
    assert listing.items[0].title == "héllo world"
    assert listing.items[0].size == len("\n  héllo   world  ".encode())
    data = listing.to_dict()
    assert "content" not in data["items"][0] and data["items"][0]["tags"] == ["a", "b"]


def test_list_filters_and_truncation(mem_brain: Brain, clock) -> None:
    ids = []
    for i in range(5):
        ids.append(mem_brain.add(f"note {i}", tags=["t"] + (["even"] if i % 2 == 0 else [])).id)
        clock.advance(10)
    mem_brain.put("cfg.a", "1")
    mem_brain.put("cfg_b", "2")
    mem_brain.put("cfgXa", "3")
    page = mem_brain.list(tags=["t"], limit=2)
    assert page.truncated and [i.id for i in page.items] == ids[:2:-1][:2]
    assert len(mem_brain.list(tags=["t", "even"], tags_mode="all").items) == 3
    assert len(mem_brain.list(tags=["even", "nope"], tags_mode="any").items) == 3
    assert len(mem_brain.list(tags=["even", "nope"], tags_mode="all").items) == 0
    # key prefixes are literal: '_' and '%' are not wildcards
    assert [i.key for i in mem_brain.list(key_prefix="cfg_").items] == ["cfg_b"]
    assert {i.key for i in mem_brain.list(key_prefix="cfg").items} == {"cfg.a", "cfg_b", "cfgXa"}
    window = mem_brain.list(since=clock.now - 35, until=clock.now - 15)
    assert [i.id for i in window.items] == [ids[3], ids[2]]
    assert len(mem_brain.list(limit=LIMIT_MAX).items) == 8
    with pytest.raises(InvalidInput):
        mem_brain.list(limit=0)
    with pytest.raises(InvalidInput):
        mem_brain.list(tags_mode="some")


def test_one_limit_rule_everywhere(mem_brain: Brain) -> None:
    """search, list, recent, due and the tools: 1..LIMIT_MAX, more is refused, never clamped."""
    mem_brain.add_many([f"item number {i}" for i in range(25)])
    listing = mem_brain.list(limit=20)
    assert len(listing.items) == 20 and listing.truncated
    for call in (lambda n: mem_brain.list(limit=n), lambda n: mem_brain.recent(limit=n),
                 lambda n: mem_brain.due(limit=n), lambda n: mem_brain.search("item", n)):
        call(LIMIT_MAX)
        for bad in (0, LIMIT_MAX + 1, 2.0, True):
            with pytest.raises(InvalidInput, match="limit"):
                call(bad)
    for tool, args in (("memory_search", {"query": "item"}), ("memory_list", {})):
        ok = mem_brain.call_tool(tool, {**args, "limit": LIMIT_MAX}, extra="all")
        assert "error" not in ok
        bad = mem_brain.call_tool(tool, {**args, "limit": LIMIT_MAX + 1}, extra="all")
        assert bad["error"]["type"] == "InvalidInput"


def test_read_returns_full_traces_and_missing(mem_brain: Brain) -> None:
    a = mem_brain.add("alpha")
    b = mem_brain.add("beta")
    mem_brain.delete(b.id)
    reading = mem_brain.read([b.id, a.id, "mt_nope", a.id])
    assert [t.id for t in reading.traces] == [a.id]
    assert reading.missing == [b.id, "mt_nope"]
    with_deleted = mem_brain.read([b.id, a.id], include_deleted=True)
    assert [t.id for t in with_deleted.traces] == [b.id, a.id]
    assert mem_brain.read(a.id).traces[0].content == "alpha"
    assert reading.to_dict()["missing"] == [b.id, "mt_nope"]
    with pytest.raises(InvalidInput):
        mem_brain.read([f"mt_{i}" for i in range(READ_MAX + 1)])


def test_recent_newest_first_with_since_and_tags(mem_brain: Brain, clock) -> None:
    old = mem_brain.add("old news", tags=["news"])
    clock.advance(100)
    mid = mem_brain.add("mid news", tags=["news"])
    clock.advance(100)
    new = mem_brain.add("new gossip", tags=["gossip"])
    assert [t.id for t in mem_brain.recent()] == [new.id, mid.id, old.id]
    assert [t.id for t in mem_brain.recent(since=clock.now - 150)] == [new.id, mid.id]
    assert [t.id for t in mem_brain.recent(limit=1)] == [new.id]
    assert [t.id for t in mem_brain.recent(tags=["news"])] == [mid.id, old.id]


# --- subscriptions ----------------------------------------------------------------------


def test_each_write_emits_once_after_commit(mem_brain: Brain) -> None:
    events: list[tuple[str, str, bool]] = []

    def record(kind: str, payload: dict) -> None:
        # after commit: a fresh read sees the write, and no transaction is open
        events.append((kind, payload["id"], mem_brain._store.db.in_transaction))

    mem_brain.subscribe(record)
    a = mem_brain.add("alpha")
    mem_brain.add("alpha")  # duplicate: reinforced, not added
    b = mem_brain.add("beta")
    mem_brain.update(a.id, content="alpha two")
    k = mem_brain.put("k", "v1")
    mem_brain.put("k", "v2")
    mem_brain.pin(a.id)
    mem_brain.pin(a.id)  # already pinned: no change, no event
    mem_brain.unpin(a.id)
    merged = mem_brain.merge([a.id, b.id])
    mem_brain.delete(merged.id)
    mem_brain.restore(merged.id)
    mem_brain.delete_key("k")
    assert [(kind, i) for kind, i, _ in events] == [
        ("add", a.id), ("add", b.id), ("update", a.id), ("add", k.id), ("update", k.id),
        ("update", a.id), ("update", a.id), ("merge", merged.id), ("delete", merged.id),
        ("restore", merged.id), ("delete", k.id),
    ]
    assert not any(open_tx for _, _, open_tx in events)


def test_put_of_the_value_already_held_tells_subscribers_nothing(file_brain: Brain) -> None:
    # Before: a put giving the key the value (and fields) it already held wrote nothing,
    # as update does, but still told subscribers "update" for a write that never happened.
    events: list[tuple[str, str]] = []
    file_brain.subscribe(lambda kind, payload: events.append((kind, payload["id"])))
    first = file_brain.put("theme", "dark", tags=["ui"])
    again = file_brain.put("theme", "dark", tags=["ui"])
    assert again.version == first.version == 1 and again.updated_at == first.updated_at
    assert events == [("add", first.id)]
    file_brain.put("theme", "light")
    assert events == [("add", first.id), ("update", first.id)]


def test_failing_subscriber_never_breaks_the_write(mem_brain: Brain) -> None:
    seen: list[str] = []

    def boom(kind: str, payload: dict) -> None:
        raise RuntimeError("subscriber bug")

    mem_brain.subscribe(boom)
    unsubscribe = mem_brain.subscribe(lambda kind, payload: seen.append(kind), kinds=["add"])
    t = mem_brain.put("k", "v")
    assert mem_brain.get_key("k").id == t.id
    mem_brain.put("k", "v2")  # an update: not asked for
    assert seen == ["add"]
    unsubscribe()
    mem_brain.add("later")
    assert seen == ["add"]
    with pytest.raises(InvalidInput):
        mem_brain.subscribe(lambda k, p: None, kinds=["nope"])


@pytest.mark.parametrize("callback", ["print", None, 42], ids=["text", "none", "number"])
def test_subscribing_something_not_callable_is_invalid_input(file_brain: Brain, callback: Any) -> None:
    # Before: accepted, then every later write logged a TypeError from the subscriber list.
    with pytest.raises(InvalidInput, match="callback"):
        file_brain.subscribe(callback)
    seen: list[str] = []
    file_brain.subscribe(lambda kind, payload: seen.append(kind))
    file_brain.add("kettle")
    assert seen == ["add"]


def test_failed_write_emits_nothing(mem_brain: Brain) -> None:
    events: list[str] = []
    mem_brain.subscribe(lambda kind, payload: events.append(kind))
    mem_brain.put("k", "v")
    with pytest.raises(VersionConflict):
        mem_brain.put("k", "v2", expected_version=7)
    with pytest.raises(InvalidInput):
        mem_brain.put("k", "")
    assert events == ["add"]


# --- TTL and expiry -----------------------------------------------------------------------


def test_expired_traces_are_invisible(mem_brain: Brain, clock) -> None:
    t = mem_brain.add("ephemeral kiwi fact", ttl=30, tags=["kiwi"])
    u = mem_brain.add("lasting kiwi fact", expires_at=clock.now + 3600, tags=["kiwi"])
    assert len(mem_brain.search("kiwi", reinforce=False)) == 2
    later = clock.now + 31
    assert [h.trace.id for h in mem_brain.search("kiwi", now=later, reinforce=False)] == [u.id]
    assert [i.id for i in mem_brain.list(now=later).items] == [u.id]
    assert [x.id for x in mem_brain.recent(now=later)] == [u.id]
    assert mem_brain.read([t.id], now=later).missing == [t.id]
    with pytest.raises(NotFound):
        mem_brain.get(t.id, now=later)
    assert mem_brain.get(t.id, include_deleted=True).id == t.id  # still in the file


@pytest.mark.parametrize("batch", [False, True])
def test_adding_a_fact_again_keeps_it_at_least_as_long_as_asked(file_brain: Brain, clock, batch: bool) -> None:
    """Dedup returned the stored trace with its own expiry: "X" added with a one-minute
    ttl and then again for good vanished a minute later. A repeat now keeps the later
    expiry (none if either asks for none), and never shortens one."""
    adds = [{"content": "the gate code is 4821", "ttl": 60}, {"content": "the gate code is 4821"},
            {"content": "the gate code is 4821", "ttl": 5}]
    if batch:
        results = file_brain.add_many(adds, report=True)
    else:
        results = [file_brain.add_result(a.pop("content"), **a) for a in adds]
    assert [r.created for r in results] == [True, False, False]
    assert {r.trace.id for r in results} == {results[0].trace.id}
    assert all(r.trace.expires_at is None for r in results[1:])
    assert file_brain.get(results[0].trace.id, now=clock.now + 3600).expires_at is None
    longer = file_brain.add("a parcel is at the door", ttl=60)
    again = file_brain.add("a parcel is at the door", ttl=600)
    assert again.id == longer.id and again.expires_at == pytest.approx(clock.now + 600)
    assert file_brain.add("a parcel is at the door", ttl=30).expires_at == pytest.approx(clock.now + 600)
    plain = file_brain.add("my passport number is X123")
    assert file_brain.add("my passport number is X123", pinned=True).pinned is True
    assert file_brain.get(plain.id).pinned is True  # a pinned repeat is not pruned
    assert file_brain.add("my passport number is X123").pinned is True  # never unpinned by a repeat


@pytest.mark.parametrize("batch", [False, True])
def test_adding_content_again_after_it_expired_stores_it_anew(file_brain: Brain, clock, batch: bool) -> None:
    """Dedup matched an expired trace (invisible to get, search and list) until reflect
    pruned it, and revived it: its old id, created_at and key came back, and whether an
    add made a new trace depended on when reflect last ran. An expired duplicate now
    counts as absent, as an expired key does for put."""
    old = file_brain.add("one-time code 4821", ttl=60)
    keyed = file_brain.put("otp", "one-time code 9999", ttl=60)
    clock.advance(61)
    adds = [{"content": "one-time code 4821", "ttl": 60}, {"content": "one-time code 4821"},
            {"content": "one-time code 9999", "type": "semantic"}]
    if batch:
        results = file_brain.add_many(adds, report=True)
    else:
        results = [file_brain.add_result(a.pop("content"), **a) for a in adds]
    assert [r.created for r in results] == [True, False, True]
    fresh = results[0].trace
    assert fresh.id != old.id and fresh.created_at == clock.now and results[1].trace.id == fresh.id
    assert file_brain.get(fresh.id).expires_at is None  # the repeat asks for no expiry
    assert results[2].trace.id != keyed.id and results[2].trace.key is None
    with pytest.raises(NotFound):
        file_brain.get_key("otp")  # the expired value is not brought back by an add without a key
    for gone in file_brain.read([old.id, keyed.id], include_deleted=True).traces:
        assert gone.deleted_at is not None and gone.metadata["deleted_reason"] == "expired"


@pytest.mark.parametrize("quota", [2, 3])
def test_an_expired_duplicate_in_a_batch_keeps_the_quota_count_exact(brain_factory, clock,
                                                                      quota: int) -> None:
    brain = brain_factory(policy=replace(Policy(), quota=quota, quota_policy="refuse"))
    old = brain.add("gate code 4821", ttl=60)
    brain.add("the user likes tea")
    clock.advance(61)
    batch = ["note c", "gate code 4821"]  # "note c" counts the scope first (the expired one live)
    if quota == 2:  # tea, c and the code again are three: refused whole
        with pytest.raises(QuotaExceeded):
            brain.add_many(batch)
        assert brain.get(old.id, include_deleted=True).deleted_at is None  # rolled back whole
    else:  # the expired trace leaves the count as it goes: room for all three
        out = brain.add_many(batch, report=True)
        assert [r.created for r in out] == [True, True] and out[1].trace.id != old.id
        assert brain.list().truncated is False and len(brain.list().items) == 3


# --- pinning ------------------------------------------------------------------------------


def test_pin_unpin_bump_version(mem_brain: Brain) -> None:
    t = mem_brain.add("pin me")
    pinned = mem_brain.pin(t.id)
    assert pinned.pinned and pinned.version == 2
    assert mem_brain.pin(t.id).version == 2  # idempotent
    assert not mem_brain.unpin(t.id).pinned
    assert mem_brain.get(t.id).version == 3
    with pytest.raises(NotFound):
        mem_brain.pin("mt_missing")


# --- quotas and limits ----------------------------------------------------------------------


def test_quota_refuse_names_scope_and_limit(clock) -> None:
    policy = replace(Policy(), quota=2)
    with Brain(":memory:", clock=clock, policy=policy) as brain:
        brain.add("one", scope="thread", scope_id="t1")
        brain.add("two", scope="thread", scope_id="t1")
        brain.add("other scope", scope="thread", scope_id="t2")
        with pytest.raises(QuotaExceeded, match=r"thread/'t1'.*quota of 2"):
            brain.add("three", scope="thread", scope_id="t1")
        with pytest.raises(QuotaExceeded):  # a batch fails whole
            brain.add_many([{"content": "x", "scope": "thread", "scope_id": "t3"},
                            {"content": "y", "scope": "thread", "scope_id": "t1"}])
        assert brain.list().truncated is False and len(brain.list().items) == 3
        brain.add("one", scope="thread", scope_id="t1")  # a duplicate takes no room
        # expired traces make room even under "refuse"
        brain.add("short-lived", scope="thread", scope_id="t2", ttl=5)
        clock.advance(10)
        brain.add("after expiry", scope="thread", scope_id="t2")


def test_quota_evict_removes_weakest_unpinned(clock) -> None:
    policy = replace(Policy(), quota=3, quota_policy="evict")
    with Brain(":memory:", clock=clock, policy=policy) as brain:
        deleted: list[dict] = []
        brain.subscribe(lambda kind, payload: deleted.append(payload), kinds=["delete"])
        oldest = brain.add("oldest and weak", created_at=clock.now - 400 * 86400)
        pinned = brain.add("old but pinned", created_at=clock.now - 500 * 86400, pinned=True)
        recent = brain.add("recent")
        newest = brain.add("newest")
        live = {i.id for i in brain.list().items}
        assert live == {pinned.id, recent.id, newest.id}
        gone = brain.read([oldest.id], include_deleted=True).traces[0]
        assert gone.metadata["deleted_reason"] == "evicted"
        assert deleted == [{"id": oldest.id, "reason": "evicted"}]
        brain.put("k", "a value")  # put goes through the same hook
        assert len(brain.list().items) == 3 and pinned.id in {i.id for i in brain.list().items}


def _full_scope(brain: Brain, clock: Any, n: int) -> None:
    """``n`` traces of varied strength: back-dated, of every importance, some pinned,
    some recalled since."""
    brain.add_many([{"content": f"old note {i}", "created_at": clock.now - (i * 37 % 400) * 86400,
                     "importance": (i % 5) / 4, "pinned": i % 7 == 0} for i in range(n)])
    for word in ("3", "14", "25"):
        brain.search(f"note {word}")


def _batch(n: int, clock: Any) -> list[dict[str, Any]]:
    """New traces, some back-dated so far they are weaker than most of the old ones."""
    return [{"content": f"new fact {i}", "importance": (i % 3) / 2,
             **({"created_at": clock.now - 900 * 86400} if i % 4 == 0 else {})} for i in range(n)]


def test_quota_eviction_reads_a_full_scope_once_per_batch(tmp_path, clock) -> None:
    """An add_many into a scope at its quota sorted the whole scope by retrievability and
    scanned it for expired traces once per item (at 200,000 traces: 0.7 s an item, 35 s
    for 50). It now reads the weakest traces once per batch and keeps evicting them in
    order, as one add at a time would."""
    policy = replace(Policy(), quota=60, quota_policy="evict")
    batch, single = (Brain(str(tmp_path / f"{n}.db"), clock=clock, policy=policy) for n in ("batch", "single"))
    for brain in (batch, single):
        _full_scope(brain, clock, 60)
    clock.advance(3600)
    with statements_run(batch) as scans:
        batch.add_many(_batch(40, clock))
    for item in _batch(40, clock):
        single.add(**item)
    assert sum("ORDER BY retrievability" in sql for sql in scans) == 1
    assert sum("expires_at <=" in sql for sql in scans) == 1
    live = [sorted(t.content for t in b.recent(limit=1000)) for b in (batch, single)]
    assert live[0] == live[1] and len(live[0]) == 60
    for brain in (batch, single):
        brain.close()


def test_quota_evict_with_everything_pinned_refuses(clock) -> None:
    policy = replace(Policy(), quota=1, quota_policy="evict")
    with Brain(":memory:", clock=clock, policy=policy) as brain:
        brain.add("keep", pinned=True)
        with pytest.raises(QuotaExceeded, match="pinned"):
            brain.add("no room")


def test_restore_is_held_to_the_quota(tmp_path, clock) -> None:
    # README: "quota is the most live traces per scope and scope id". Before, restore
    # brought a trace back without asking, so a full scope held quota + 1 live traces.
    refuse = replace(Policy(), quota=2)
    with Brain(str(tmp_path / "refuse.db"), clock=clock, policy=refuse) as brain:
        gone = brain.add("first")
        brain.delete(gone.id)
        brain.add("second", scope="user")
        brain.add("third")
        with pytest.raises(QuotaExceeded, match="quota of 2"):
            brain.restore(gone.id)
        assert brain.get(gone.id, include_deleted=True).deleted_at is not None
        assert brain.stats()["live"] == 2
    evict = replace(Policy(), quota=2, quota_policy="evict")
    with Brain(str(tmp_path / "evict.db"), clock=clock, policy=evict) as brain:
        deleted: list[dict] = []
        brain.subscribe(lambda kind, payload: deleted.append(payload), kinds=["delete"])
        gone = brain.add("first")
        brain.delete(gone.id)
        weak = brain.add("weak and old", created_at=clock.now - 400 * 86400)
        kept = brain.add("pinned", pinned=True)
        back = brain.restore(gone.id)
        assert back.live and {i.id for i in brain.list().items} == {gone.id, kept.id}
        assert brain.read([weak.id], include_deleted=True).traces[0].metadata["deleted_reason"] == "evicted"
        assert deleted[-1] == {"id": weak.id, "reason": "evicted"}
        assert brain.check()["ok"]


def test_max_content_bytes_names_the_limit(clock) -> None:
    with Brain(":memory:", clock=clock, policy=replace(Policy(), max_content_bytes=10)) as brain:
        brain.add("0123456789")
        with pytest.raises(InvalidInput, match="limit of 10 bytes"):
            brain.add("0123456789é")
        with pytest.raises(InvalidInput, match="limit of 10 bytes"):
            brain.put("k", "x" * 11)
        assert brain.stats()["live"] == 1


# --- working memory -----------------------------------------------------------------------


def test_end_task_archives_and_promotes(mem_brain: Brain) -> None:
    w1 = mem_brain.add("scratch: tried approach A", type="working", task_id="task-1")
    w2 = mem_brain.add("finding: approach B works", type="working", task_id="task-1")
    other = mem_brain.add("other task scratch", type="working", task_id="task-2")
    fact = mem_brain.add("episodic note of the task", task_id="task-1")
    result = mem_brain.end_task("task-1", promote=[w2.id])
    assert result == {"task_id": "task-1", "archived": [w1.id], "promoted": [w2.id]}
    assert mem_brain.read([w1.id]).missing == [w1.id]
    archived = mem_brain.read([w1.id], include_deleted=True).traces[0]
    assert archived.metadata["archived"] is True and archived.deleted_at is not None
    promoted = mem_brain.get(w2.id)
    assert promoted.type == "episodic" and promoted.metadata["promoted_from_task"] == "task-1"
    assert mem_brain.get(other.id).live and mem_brain.get(fact.id).live
    assert mem_brain.end_task("task-1") == {"task_id": "task-1", "archived": [], "promoted": []}


def test_end_task_promoting_a_note_already_remembered_deduplicates_as_add_does(mem_brain: Brain) -> None:
    known = mem_brain.add("approach B works")
    note = mem_brain.add("approach B works", type="working", task_id="t")
    told: list[tuple[str, str]] = []
    mem_brain.subscribe(lambda kind, payload: told.append((kind, payload["id"])))
    result = mem_brain.end_task("t", promote=[note.id])
    assert result == {"task_id": "t", "archived": [note.id], "promoted": [known.id]}
    assert mem_brain.get(note.id, include_deleted=True).metadata["archived"] is True
    again = mem_brain.get(known.id)
    assert again.access_count == known.access_count + 1 and again.version == known.version
    assert told == [("delete", note.id)]  # the known memory did not change: no update


def test_end_task_bad_promote_changes_nothing(mem_brain: Brain) -> None:
    w = mem_brain.add("scratch", type="working", task_id="t")
    other = mem_brain.add("scratch elsewhere", type="working", task_id="u")
    with pytest.raises(InvalidInput, match="cannot promote"):
        mem_brain.end_task("t", promote=[other.id])
    assert mem_brain.get(w.id).live
    # working traces without a task are allowed; they simply decay (no task ends them)
    loose = mem_brain.add("loose scratch", type="working")
    assert loose.task_id is None


# --- prospective memory ---------------------------------------------------------------------


def test_due_returns_reminders_oldest_due_first(mem_brain: Brain, clock) -> None:
    later = mem_brain.add("call the dentist", type="prospective", due_at=clock.now + 100)
    sooner = mem_brain.add("renew passport", type="prospective", due_at=clock.now + 50)
    mem_brain.add("someday maybe", type="prospective", cue="vacation")
    assert mem_brain.due() == []
    assert [t.id for t in mem_brain.due(clock.now + 60)] == [sooner.id]
    assert [t.id for t in mem_brain.due(clock.now + 200)] == [sooner.id, later.id]
    assert [t.id for t in mem_brain.due(clock.now + 200, limit=1)] == [sooner.id]
    mem_brain.delete(sooner.id)
    assert [t.id for t in mem_brain.due(clock.now + 200)] == [later.id]


def test_due_at_without_a_type_makes_a_reminder_and_with_another_type_is_refused(
        file_brain: Brain, clock) -> None:
    # Before: add("call the bank", due_at=...) stored an episodic memory that due() never
    # listed, and said nothing; a due time means a reminder.
    bank = file_brain.add("call the bank", due_at=clock.now + 10)
    assert (bank.type, bank.due_at) == ("prospective", clock.now + 10)
    [vet] = file_brain.add_many([{"content": "book the vet", "due_at": clock.now + 20}])
    assert vet.type == "prospective"
    assert [t.id for t in file_brain.due(clock.now + 30)] == [bank.id, vet.id]
    # an explicit type that is not a reminder's is a contradiction: refused, nothing written
    with pytest.raises(InvalidInput, match="due_at is for reminders"):
        file_brain.add("the bank called", type="episodic", due_at=clock.now + 10)
    with pytest.raises(InvalidInput, match=r"item 1: due_at is for reminders"):
        file_brain.add_many(["fine", {"content": "a fact", "type": "semantic", "due_at": clock.now}])
    # an update may not leave a memory with a due time that due() would never list
    note = file_brain.add("the bank is open till five")
    with pytest.raises(InvalidInput, match="due_at is for reminders"):
        file_brain.update(note.id, due_at=clock.now + 10)
    with pytest.raises(InvalidInput, match="due_at is for reminders"):
        file_brain.update(bank.id, type="episodic", due_at=clock.now + 10)
    assert file_brain.stats()["live"] == 3
    assert file_brain.get(note.id).due_at is None and file_brain.get(bank.id).type == "prospective"
    # what a consistent update asks for is done
    done = file_brain.update(bank.id, type="episodic", due_at=None)
    assert (done.type, done.due_at) == ("episodic", None)
    assert file_brain.update(note.id, type="prospective", due_at=clock.now + 5).due_at == clock.now + 5


def test_a_reminder_said_again_sooner_comes_due_sooner(file_brain: Brain, clock) -> None:
    # the repeat deduplicated to the first reminder and its earlier due time was dropped:
    # "call mom" asked for tomorrow came due in five days
    DAY = 86_400
    first = file_brain.add("call mom", due_at=clock.now + 5 * DAY)
    again = file_brain.add_result("call mom", due_at=clock.now + DAY)
    assert again.deduplicated and again.trace.id == first.id and again.trace.due_at == clock.now + DAY
    assert [t.id for t in file_brain.due(clock.now + 2 * DAY)] == [first.id]
    # a later due time, or none, never postpones it
    assert file_brain.add("call mom", due_at=clock.now + 9 * DAY).due_at == clock.now + DAY
    assert file_brain.add("call mom", type="prospective").due_at == clock.now + DAY


def test_import_keeps_a_due_time_on_a_memory_that_is_not_a_reminder(brain_factory, tmp_path,
                                                                      clock) -> None:
    # a brain may already hold such traces (written before due_at made a reminder): they
    # must still export and import as they are
    source = brain_factory(tmp_path / "a.db")
    bank = source.add("call the bank", due_at=clock.now + 10)
    dump = tmp_path / "dump.jsonl"
    source.export(str(dump))
    lines = [json.loads(line) for line in dump.read_text().splitlines()]
    [record] = [line["trace"] for line in lines if "trace" in line]
    assert record["type"] == "prospective"
    record["type"] = "episodic"
    dump.write_text("".join(json.dumps(line) + "\n" for line in lines))
    target = brain_factory(tmp_path / "b.db")
    target.import_jsonl(str(dump))
    trace = target.get(bank.id)
    assert (trace.type, trace.due_at) == ("episodic", clock.now + 10)


def test_search_finds_prospective_trace_by_cue(mem_brain: Brain) -> None:
    reminder = mem_brain.add("Remind the user to bring sunscreen", type="prospective",
                             cue="beach trip")
    mem_brain.add("The user enjoys hiking")
    hits = mem_brain.search("planning a beach outing", reinforce=False)
    assert hits and hits[0].trace.id == reminder.id


def test_backup_copies_a_consistent_brain(brain_factory, tmp_path) -> None:
    brain = brain_factory()
    brain.put("k", "backed up value")
    target = tmp_path / "copy.db"
    assert brain.backup(str(target)) == str(target)
    copy = brain_factory(target)
    assert copy.get_key("k").content == "backed up value"
    with pytest.raises(InvalidInput, match="already exists"):
        brain.backup(str(target))


def test_quota_counts_a_batch_in_one_transaction(clock) -> None:
    with Brain(":memory:", clock=clock, policy=replace(Policy(), quota=2)) as brain:
        with pytest.raises(QuotaExceeded):
            brain.add_many(["a", "b", "c"])
        assert brain.stats()["live"] == 0  # nothing half-written
        brain.add_many(["a", "b"])
        assert brain.stats()["live"] == 2
    policy = replace(Policy(), quota=3, quota_policy="evict")
    with Brain(":memory:", clock=clock, policy=policy) as brain:
        added = brain.add_many([f"item {i}" for i in range(5)])
        assert brain.list().truncated is False and len(brain.list().items) == 3
        assert len(brain.read([t.id for t in added]).traces) == 3


def test_reflect_prunes_expired_and_weak_but_never_pinned(mem_brain: Brain, clock) -> None:
    pinned = mem_brain.add("pinned working note", type="working", pinned=True)
    weak = mem_brain.add("forgettable working note", type="working")
    expiring = mem_brain.put("cache", "short-lived value", ttl=60, pinned=False)
    later = clock.now + 365 * 86400  # R of a 2-day-stability trace is ~0 by then
    mem_brain.reflect(now=later)
    assert mem_brain.get(pinned.id, now=later).pinned
    assert mem_brain.read([weak.id, expiring.id], now=later).missing == [weak.id, expiring.id]
    assert mem_brain.get(expiring.id, include_deleted=True).deleted_at is not None


def test_keep_lines_counts_newlines_only(file_brain: Brain) -> None:
    # a JSON Lines log may hold U+2028, a form feed or a lone \r inside a record
    # (json.dumps(ensure_ascii=False) writes U+2028 raw): a line ends at \n, so keep_lines=2
    # keeps the last two records whole, not the tail of the last one
    records = ['{"n": 1}\n', '{"msg": "a\u2028b\x0cc\x1ed"}\r\n', '{"msg": "progress 10%\r20%\x85"}\n']
    value = file_brain.put("log", "".join(records), keep_lines=2).content
    assert value == "".join(records[1:])


def test_changing_a_reminders_type_makes_it_a_plain_memory(file_brain: Brain, clock) -> None:
    """update(reminder, type="episodic") was refused ("give ... no due_at", though the
    reminder had one and memory_update and the CLI could not clear it): a done reminder
    could not become a plain memory from a tool or the shell. A type change away from a
    reminder now clears its due time; a due time on another type is still refused, with a
    message saying how to make one."""
    done = file_brain.add("call the bank", due_at=clock.now + 10, cue="money")
    plain = file_brain.update(done.id, type="semantic")
    assert (plain.type, plain.due_at, plain.version) == ("semantic", None, 2)
    assert file_brain.due(clock.now + 20) == []
    note = file_brain.add("the bank is open till five")
    with pytest.raises(InvalidInput, match="due_at is for reminders") as refused:
        file_brain.update(note.id, due_at=clock.now + 10)
    assert "no due_at" not in str(refused.value) and "type prospective" in str(refused.value)
    assert file_brain.get(note.id).due_at is None
