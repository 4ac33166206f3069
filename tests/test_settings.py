"""Settings stored in the brain file (``Brain.set_setting``, ``brainmem config``): every
surface that opens the file without a Policy of its own runs on them."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import clirun
import pytest
from unprivileged import unprivileged

from brainmem import Brain, Policy
from brainmem.errors import InvalidInput, ReadOnlyBrain
from brainmem.store_log import SETTING_PREFIX

#: 2023-05-30 10:00 UTC is 19:00 in Tokyo: "yesterday" is May 29 in UTC, May 28 15:00 to
#: May 29 15:00 UTC in Tokyo.
NOW = "2023-05-30T10:00:00Z"
UTC_YESTERDAY = "2023-05-29T20:00:00Z"
TOKYO_YESTERDAY = "2023-05-28T20:00:00Z"


def cli(db: Path, *argv: str, stdin: str | None = None) -> tuple[int, str, str]:
    done = clirun.run("--brain", str(db), *argv, stdin=stdin)
    return done.returncode, done.stdout, done.stderr


def stored(db: Path) -> dict[str, str]:
    with Brain(str(db), readonly=True) as brain:
        return {k: v for k, v in brain._store.db.execute(
            "SELECT key, value FROM meta WHERE key LIKE 'policy.%'")}


def test_config_sets_gets_lists_and_unsets_through_the_cli(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    assert cli(db, "init")[0] == 0
    assert cli(db, "config", "set", "time_zone", "Asia/Tokyo") == (0, "Asia/Tokyo\n", "")
    assert cli(db, "config", "set", "quota", "500")[:2] == (0, "500\n")
    assert cli(db, "config", "set", "bm25_weights", "[1, 0.5, 2]")[:2] == (0, "[1.0, 0.5, 2.0]\n")
    assert cli(db, "config", "get", "time_zone")[:2] == (0, "Asia/Tokyo\n")
    code, out, _ = cli(db, "config", "get", "quota", "--json")
    assert code == 0 and json.loads(out) == {"key": "quota", "value": 500, "default": None,
                                             "source": "stored", "stored": 500}
    assert json.loads(cli(db, "config", "--json", "get", "quota")[1])["value"] == 500  # either place
    code, out, _ = cli(db, "config", "--json")
    rows = {r["key"]: r for r in json.loads(out)}
    assert set(rows) == set(Policy.__dataclass_fields__) - {"merge_threshold"}  # unused: no setting
    assert {k for k, r in rows.items() if r["source"] == "stored"} == {"time_zone", "quota", "bm25_weights"}
    assert rows["max_tags"] == {"key": "max_tags", "value": 64, "default": 64, "source": "default"}
    code, out, _ = cli(db, "config", "list")
    assert code == 0 and any(line.split()[:2] == ["time_zone", "Asia/Tokyo"] for line in out.splitlines())
    with Brain(str(db)) as brain:  # Python reads them too
        assert (brain.policy.time_zone, brain.policy.quota, brain.policy.bm25_weights) == \
            ("Asia/Tokyo", 500, (1.0, 0.5, 2.0))
    assert cli(db, "config", "set", "quota", "none")[:2] == (0, "null\n")  # "off", stored
    assert cli(db, "config", "unset", "time_zone")[:2] == (0, "UTC\n")
    assert set(stored(db)) == {SETTING_PREFIX + "quota", SETTING_PREFIX + "bm25_weights"}



def test_config_list_shows_each_value_whole(tmp_path: Path) -> None:
    """The table cut every cell to 60 characters, so ``stability_base``'s value and default
    ended in "procedur…": what ``config set`` needs could not be read off ``config list``."""
    db = tmp_path / "b.db"
    assert cli(db, "init")[0] == 0
    base = json.dumps({"episodic": 31536000.0, "semantic": 157680000.0, "procedural": 157680000.0,
                       "prospective": 31536000.0, "working": 86400.0}, sort_keys=True)
    assert cli(db, "config", "set", "stability_base", base)[0] == 0
    code, out, _ = cli(db, "config", "list")
    row = next(line for line in out.splitlines() if line.startswith("stability_base "))
    assert code == 0 and "…" not in row
    assert base in row and '"working": 604800.0}' in row  # the value stored and the default

@pytest.mark.parametrize(("argv", "message"), [
    (("set", "quotaa", "5"), "'quotaa' is not a setting (a field of brainmem.Policy); did you mean 'quota'?"),
    (("set", "quota", "abc"), "Policy.quota must be an integer, not 'abc'"),
    (("set", "quota", "-1"), "Policy.quota must be at least 1, not -1"),
    (("set", "weight_recency", "2"), "Policy.weight_recency must be between 0 and 1, not 2.0"),
    (("set", "time_zone", "Mars/Olympus"), "Policy.time_zone 'Mars/Olympus' is not a known time zone"),
    (("set", "derive_min_size", "50"), "Policy.derive_min_size must not exceed derive_max_size"),
    (("set", "bm25_weights", "[1, 2]"), "Policy.bm25_weights needs 3 weights"),
    (("set", "merge_threshold", "0.9"), "Policy.merge_threshold is not used by this brainmem"),
    (("get", "nope"), "'nope' is not a setting"),
    (("unset", "nope"), "'nope' is not a setting"),
])
def test_a_bad_key_or_value_is_one_line_exit_2_and_nothing_written(
        tmp_path: Path, argv: tuple[str, ...], message: str) -> None:
    db = tmp_path / "b.db"
    assert cli(db, "config", "set", "quota", "7", "--create")[0] == 0
    before = stored(db)
    code, out, err = cli(db, "config", *argv)
    assert (code, out) == (2, "") and message in err and err.count("\n") == 1
    assert stored(db) == before


def test_a_read_only_brain_refuses_to_store_a_setting(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    assert cli(db, "init")[0] == 0
    code, out, err = cli(db, "--readonly", "config", "set", "quota", "5")
    assert (code, out) == (1, "") and "read-only" in err and err.count("\n") == 1
    assert stored(db) == {}
    with Brain(str(db), readonly=True) as brain, pytest.raises(ReadOnlyBrain):
        brain.set_setting("quota", 5)
    assert cli(db, "--readonly", "config", "get", "quota")[:2] == (0, "null\n")  # reading is fine


def test_config_set_on_an_unwritable_brain_says_why(tmp_path: Path) -> None:
    # a reading command opens such a file read-only by itself; `config set` said only
    # "... was opened read-only", which the user never asked for
    path = tmp_path / "ro.brain"
    Brain(str(path)).close()
    os.chmod(path, 0o444)
    os.chmod(tmp_path, 0o555)
    script = """
        from brainmem.cli import main
        print("get", main(["--brain", sys.argv[2], "config", "get", "quota"]))
        print("set", main(["--brain", sys.argv[2], "config", "set", "quota", "5"]))
    """
    try:
        done = unprivileged(script, str(tmp_path), str(path))
    finally:
        os.chmod(tmp_path, 0o755)
        os.chmod(path, 0o644)
    assert "get 0" in done.stdout and "set 1" in done.stdout
    assert "not writable" in done.stderr and "opened read-only" not in done.stderr
    assert stored(path) == {}


def test_a_missing_brain_is_not_created_by_config(tmp_path: Path) -> None:
    db = tmp_path / "typo.db"
    code, _, err = cli(db, "config", "set", "quota", "5")
    assert code == 2 and "no brain file" in err and not db.exists()


def _first_hit(found: list[dict[str, object]]) -> object:
    return found[0]["content"] if found else None


def test_a_stored_time_zone_decides_what_yesterday_means_in_the_cli_and_the_tools(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    for text, when in (("hiked the ridge", UTC_YESTERDAY), ("baked bread", TOKYO_YESTERDAY)):
        assert cli(db, "add", text, "--created-at", when)[0] == 0

    def cli_search() -> object:
        code, out, _ = cli(db, "--readonly", "search", "what did I do yesterday", "--now", NOW, "--json")
        assert code == 0
        return _first_hit(json.loads(out)["results"])

    def tool_search() -> object:  # the tool layer the MCP server serves, as `serve` opens the brain
        from datetime import datetime

        with Brain(str(db), readonly=True, clock=lambda: datetime.fromisoformat(NOW)) as brain:
            found = brain.call_tool("memory_search", {"query": "what did I do yesterday"})
        return _first_hit(found["results"])

    assert cli_search() == tool_search() == "hiked the ridge"
    assert cli(db, "config", "set", "time_zone", "Asia/Tokyo")[0] == 0
    assert cli_search() == tool_search() == "baked bread"
    assert cli(db, "config", "unset", "time_zone")[0] == 0
    assert cli_search() == "hiked the ridge"


def test_an_explicit_policy_wins_over_the_file_and_set_setting_applies_at_once(tmp_path: Path) -> None:
    path = str(tmp_path / "b.db")
    with Brain(path) as brain:
        assert brain.set_setting("max_tags", 3)["value"] == 3
        assert brain.policy.max_tags == 3  # this Brain runs on it from now on
        with pytest.raises(InvalidInput, match="over the limit of 3"):
            brain.add("x", tags=["a", "b", "c", "d"])
        brain.set_setting("stability_base", {"episodic": 1, "semantic": 2, "procedural": 3,
                                             "prospective": 4, "working": 5})
        assert brain.policy.stability_base["working"] == 5.0
        assert brain.unset_setting("stability_base")["source"] == "default"
    with Brain(path, policy=Policy()) as brain:  # explicit > stored
        assert brain.policy.max_tags == 64 and brain.setting("max_tags")["source"] == "policy"
        assert brain.setting("max_tags")["stored"] == 3
        brain.set_setting("max_tags", 5)  # stored for the others; this Brain keeps its Policy
        assert brain.policy.max_tags == 64
    with Brain(path, readonly=True) as brain:
        assert brain.policy.max_tags == 5 and brain.setting("max_tags")["source"] == "stored"
        assert brain.settings()[0]["key"] == "max_content_bytes"


def test_with_no_stored_setting_the_policy_is_the_default(tmp_path: Path) -> None:
    with Brain(str(tmp_path / "b.db")) as brain:
        assert brain.policy == Policy()
        assert {r["source"] for r in brain.settings()} == {"default"}
        assert all("stored" not in r for r in brain.settings())


def test_unset_that_would_leave_an_invalid_policy_is_refused(tmp_path: Path) -> None:
    with Brain(str(tmp_path / "b.db")) as brain:
        brain.set_setting("derive_max_size", 30)
        brain.set_setting("derive_min_size", 20)
        with pytest.raises(InvalidInput, match="derive_min_size must not exceed derive_max_size"):
            brain.unset_setting("derive_max_size")
        assert brain.policy.derive_max_size == 30 and brain.setting("derive_max_size")["source"] == "stored"


def test_a_stored_setting_that_cannot_be_used_warns_and_the_default_applies(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "b.db"
    with Brain(str(path)) as brain:
        brain.set_setting("quota", 9)
        with brain._store.write():  # as a newer brainmem, or a hand edit, could leave them
            brain._store.setting_store("weight_recency", "7")
            brain._store.setting_store("from_the_future", "1")
    with caplog.at_level("WARNING", "brainmem"), Brain(str(path)) as brain:
        assert brain.policy.quota == 9 and brain.policy.weight_recency == Policy().weight_recency
        assert brain.setting("weight_recency") | {"value": 0} == {
            "key": "weight_recency", "value": 0, "default": 0.2, "source": "default", "stored": "7"}
    assert [r.getMessage().split(": ", 2)[2] for r in caplog.records] == [
        "the stored setting from_the_future = 1 is not used: 'from_the_future' is not a setting "
        "(a field of brainmem.Policy)",
        "the stored setting weight_recency = 7 is not used: Policy.weight_recency must be between "
        "0 and 1, not 7.0"]
    assert cli(path, "config", "get", "weight_recency")[:2] == (0, "0.2\n")  # the CLI runs
    assert cli(path, "config", "unset", "from_the_future")[:2] == (0, "from_the_future removed\n")
    with Brain(str(path)) as brain:
        brain.unset_setting("weight_recency")
    assert set(stored(path)) == {SETTING_PREFIX + "quota"}


def test_settings_travel_with_an_export_and_the_brains_own_win(tmp_path: Path) -> None:
    source, fresh, other = (tmp_path / n for n in ("a.db", "fresh.db", "other.db"))
    with Brain(str(source)) as brain:
        brain.add("plain export")
        out = io.StringIO()
        brain.export(out)
        assert "settings" not in json.loads(out.getvalue().splitlines()[0])  # as before: none stored
    assert cli(source, "config", "set", "time_zone", "Asia/Tokyo")[0] == 0
    assert cli(source, "config", "set", "quota", "100")[0] == 0
    assert cli(source, "export", str(tmp_path / "a.jsonl"))[0] == 0
    header = json.loads((tmp_path / "a.jsonl").read_text().splitlines()[0])
    assert header["settings"] == {"quota": 100, "time_zone": "Asia/Tokyo"}

    code, out, _ = cli(fresh, "import", str(tmp_path / "a.jsonl"))
    assert code == 0 and "stored the file's settings: quota, time_zone" in out
    assert stored(fresh) == stored(source)

    assert cli(other, "config", "set", "time_zone", "Europe/Berlin", "--create")[0] == 0
    with Brain(str(other)) as brain:
        report = brain.import_jsonl(str(tmp_path / "a.jsonl"))
        assert report.settings == ["quota"] and report.to_dict()["settings"] == ["quota"]
        assert (brain.policy.time_zone, brain.policy.quota) == ("Europe/Berlin", 100)  # at once


@pytest.mark.parametrize(("settings", "message"), [
    ({"quota": -3}, "line 1: Policy.quota must be at least 1"),
    ({"nope": 1, "quota": 0}, "line 1: Policy.quota must be at least 1"),  # unknown names are skipped
    ([1], "line 1: the header's settings must be a JSON object"),
])
def test_an_import_with_bad_settings_imports_nothing(tmp_path: Path, settings: object, message: str) -> None:
    lines = [json.dumps({"brainmem": "x", "schema": 1, "traces": 1, "settings": settings}),
             json.dumps({"trace": {"id": "mt_1", "content": "hello", "created_at": 1.0}})]
    with Brain(str(tmp_path / "b.db")) as brain:
        with pytest.raises(InvalidInput, match=message.replace("(", r"\(")):
            brain.import_jsonl(io.StringIO("\n".join(lines) + "\n"))
        assert brain.stats()["live"] == 0 and brain.policy == Policy()
    assert stored(tmp_path / "b.db") == {}


def test_an_import_skips_a_setting_this_brainmem_does_not_know_as_opening_does(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """An export from a newer brainmem (a setting this one does not know) was refused whole
    ("'from_the_future' is not a setting"), though a brain file holding one opens with a
    warning. The import now skips it with a warning and says so; the traces come in."""
    export = tmp_path / "a.jsonl"
    export.write_text("\n".join([
        json.dumps({"brainmem": "x", "schema": 1, "traces": 1,
                    "settings": {"from_the_future": 1, "quota": 100}}),
        json.dumps({"trace": {"id": "mt_1", "content": "hello", "created_at": 1.0}})]) + "\n")
    with caplog.at_level("WARNING", "brainmem"), Brain(str(tmp_path / "b.db")) as brain:
        report = brain.import_jsonl(str(export))
        assert (report.imported, report.settings, report.settings_skipped) == (1, ["quota"], ["from_the_future"])
        assert brain.policy.quota == 100
    assert "'from_the_future' is not a setting" in caplog.text
    assert stored(tmp_path / "b.db") == {SETTING_PREFIX + "quota": "100"}
    code, out, err = cli(tmp_path / "c.db", "import", str(export))
    assert code == 0 and "imported 1 traces" in out
    assert "skipped the file's settings this brainmem does not know: from_the_future" in out


def test_an_import_whose_settings_conflict_with_the_brains_imports_nothing(tmp_path: Path) -> None:
    lines = [json.dumps({"brainmem": "x", "schema": 1, "settings": {"derive_max_size": 4}}),
             json.dumps({"trace": {"id": "mt_1", "content": "hello", "created_at": 1.0}})]
    with Brain(str(tmp_path / "b.db")) as brain:
        brain.set_setting("derive_min_size", 6)
        with pytest.raises(InvalidInput, match="do not fit the brain's own: Policy.derive_min_size"):
            brain.import_jsonl(io.StringIO("\n".join(lines) + "\n"))
        assert brain.stats()["live"] == 0 and brain.policy.derive_max_size == 12
    assert set(stored(tmp_path / "b.db")) == {SETTING_PREFIX + "derive_min_size"}


def test_cli_stdin_content_follows_the_stored_content_limit(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    big = "word " * 16_000  # 80,000 bytes: over the default 64 KiB
    assert cli(db, "add", "-", stdin=big)[0] == 2
    assert cli(db, "config", "set", "max_content_bytes", "100000", "--create")[0] == 0
    code, out, err = cli(db, "add", "-", stdin=big)
    assert code == 0, err
    code, out, err = cli(db, "put", "k", "-", stdin=big)
    assert code == 0, err
    assert cli(db, "config", "set", "max_content_bytes", "10")[0] == 0
    code, _, err = cli(db, "add", "-", stdin="more than ten bytes")
    assert code == 2 and "10" in err


def test_an_export_of_a_brain_with_raised_limits_imports_into_a_fresh_brain(tmp_path: Path) -> None:
    """The traces were checked against the importing brain's limits before the file's own
    were taken: a brain that stored max_content_bytes 200,000 could not be restored from its
    export into a new file ("over the limit of 65536 bytes")."""
    big = "word " * 20_000  # 100,000 bytes
    with Brain(str(tmp_path / "a.db")) as brain:
        brain.set_setting("max_content_bytes", 200_000)
        brain.set_setting("max_tags", 70)
        brain.add(big, tags=[f"t{i}" for i in range(70)])
        brain.export(str(tmp_path / "a.jsonl"))
    with Brain(str(tmp_path / "fresh.db")) as brain:
        report = brain.import_jsonl(str(tmp_path / "a.jsonl"))
        assert report.imported == 1 and report.settings == ["max_content_bytes", "max_tags"]
        assert brain.policy.max_content_bytes == 200_000
    # the brain's own settings win, and the traces are checked against what it runs on
    with Brain(str(tmp_path / "small.db")) as brain:
        brain.set_setting("max_content_bytes", 50_000)
        with pytest.raises(InvalidInput, match="over the limit of 50000 bytes"):
            brain.import_jsonl(str(tmp_path / "a.jsonl"))
        assert brain.stats()["live"] == 0 and set(stored(tmp_path / "small.db")) == {
            SETTING_PREFIX + "max_content_bytes"}
    # a Brain given a Policy runs on it, whatever the file says
    with Brain(str(tmp_path / "given.db"), policy=Policy()) as brain:
        with pytest.raises(InvalidInput, match="over the limit of 65536 bytes"):
            brain.import_jsonl(str(tmp_path / "a.jsonl"))


def test_a_key_stored_under_a_larger_limit_is_still_read_listed_and_deleted(tmp_path: Path) -> None:
    """Once ``config set max_key_chars`` lowered the limit, a key stored before could not be
    read, listed by its prefix or deleted by key ("key is 14 characters, over the limit
    of 5"): the limit is what a write may store, not what a lookup may ask for."""
    db = tmp_path / "b.db"
    assert cli(db, "put", "favourite_city", "Paris", "--create")[0] == 0
    assert cli(db, "config", "set", "max_key_chars", "5")[0] == 0
    code, out, err = cli(db, "get-key", "favourite_city")
    assert code == 0 and "Paris" in out, err
    code, out, err = cli(db, "list", "--key-prefix", "favourite_", "--json")
    assert code == 0 and "favourite_city" in out, err
    code, _, err = cli(db, "put", "favourite_city", "Rome")  # a write still follows the limit
    assert code == 2 and "over the limit of 5" in err
    assert cli(db, "delete-key", "favourite_city")[0] == 0
    with Brain(str(db)) as brain:
        assert brain.stats()["live"] == 0
        with pytest.raises(InvalidInput, match="key must not be empty"):
            brain.get_key(" ")


def test_a_tag_stored_under_a_larger_limit_still_filters(tmp_path: Path) -> None:
    """Once ``max_tag_chars`` was lowered, ``list --tag`` and ``search --tag`` with a tag the
    brain held were refused ("tag is 11 characters, over the limit of 4"), hiding its traces."""
    db = tmp_path / "b.db"
    assert cli(db, "add", "my cat luna", "--tag", "family-pets", "--create")[0] == 0
    assert cli(db, "config", "set", "max_tag_chars", "4")[0] == 0
    for command in (("list",), ("search", "cat")):
        code, out, err = cli(db, *command, "--tag", "family-pets")
        assert code == 0 and "my cat luna" in out, err
    code, _, err = cli(db, "add", "my dog rex", "--tag", "family-pets")  # a write still follows it
    assert code == 2 and "over the limit of 4" in err


def test_an_export_of_a_brain_that_lowered_a_limit_still_imports_what_it_held(tmp_path: Path) -> None:
    """The header's lowered max_content_bytes is stored, but the traces the brain held
    before it was lowered are checked against the importing brain's own limit, as before."""
    with Brain(str(tmp_path / "a.db")) as brain:
        brain.add("a memory of forty bytes, give or take a few")
        brain.set_setting("max_content_bytes", 10)
        brain.export(str(tmp_path / "a.jsonl"))
    with Brain(str(tmp_path / "fresh.db")) as brain:
        assert brain.import_jsonl(str(tmp_path / "a.jsonl")).imported == 1
        assert brain.policy.max_content_bytes == 10
