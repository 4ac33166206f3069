"""Integers past SQLite's 64 bits and text that is not Unicode, at every surface: a
clear error from the BrainmemError tree (an error dict from a tool, one line and a
non-zero exit from the CLI), nothing written. Before, each of these was an
OverflowError or a UnicodeEncodeError from deep inside."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from brainmem import Brain
from brainmem.cli import main
from brainmem.errors import InvalidInput, NotFound

HUGE = [2**63, 10**30]


@pytest.mark.parametrize("offset", HUGE)
def test_a_huge_list_offset_is_invalid_input(file_brain: Brain, offset: int) -> None:
    file_brain.add("kettle")
    with pytest.raises(InvalidInput, match="offset"):
        file_brain.list(offset=offset)
    assert file_brain.list(offset=2**63 - 1).items == []  # the largest SQLite takes: nothing there


@pytest.mark.parametrize("retrieval_id", [*HUGE, -(2**63) - 1])
def test_feedback_on_a_huge_retrieval_id_is_not_found(file_brain: Brain, retrieval_id: int) -> None:
    trace = file_brain.add("kettle")
    with pytest.raises(NotFound):
        file_brain.feedback(retrieval_id, used=[trace.id])
    result = file_brain.call_tool("memory_feedback", {"retrieval_id": retrieval_id, "used": [trace.id]},
                                  extra="all")
    assert result["error"]["type"] in ("NotFound", "InvalidInput")  # the schema refuses a negative id


@pytest.mark.parametrize("retrieval_id", [None, "1", 1.0, True, [1]])
def test_feedback_on_a_retrieval_id_that_is_not_an_int_is_invalid_input(file_brain: Brain,
                                                                        retrieval_id: object) -> None:
    trace = file_brain.add("kettle")
    rid = file_brain.search("kettle").retrieval_id
    with pytest.raises(InvalidInput, match="retrieval_id"):
        file_brain.feedback(retrieval_id, used=[trace.id])  # type: ignore[arg-type]
    assert file_brain.feedback(rid, used=[trace.id]) == 1  # a real one still counts: nothing was recorded
    with pytest.raises(NotFound):
        file_brain.feedback(rid + 1, used=[trace.id])  # well typed, absent: NotFound


@pytest.mark.parametrize("field", ["access_count", "version"])
def test_an_import_with_a_huge_count_is_invalid_input(file_brain: Brain, tmp_path: Path, field: str) -> None:
    _refused_by_import(tmp_path, _export_with(file_brain, tmp_path, field, str(2**63)), field)


def test_the_cli_refuses_a_huge_offset_in_one_line(tmp_path: Path, capsys: Any) -> None:
    db = str(tmp_path / "cli.db")
    assert main(["--brain", db, "--create", "add", "kettle"]) == 0
    capsys.readouterr()
    code = main(["--brain", db, "list", "--offset", str(10**30)])
    out, err = capsys.readouterr()
    assert code != 0 and out == ""
    assert len(err.strip().splitlines()) == 1 and "offset" in err


@pytest.mark.parametrize("content", ["hi \ud800", [{"type": "text", "text": "hi \udfff"}]], ids=["text", "parts"])
def test_observe_refuses_a_lone_surrogate(file_brain: Brain, content: Any) -> None:
    with pytest.raises(InvalidInput, match="message 0"):
        file_brain.observe([{"role": "user", "content": content}])
    result = file_brain.call_tool("memory_observe", {"messages": [{"role": "user", "content": content}]},
                                  extra="all")
    assert result["error"]["type"] == "InvalidInput"
    assert file_brain.stats()["live"] == 0


def test_an_inverted_time_window_is_invalid_input(file_brain: Brain, tmp_path: Path,
                                                                   capsys: Any) -> None:
    # Before: since after until searched an empty window and said nothing (swapped arguments
    # looked like "no memories").
    file_brain.add("kettle", created_at="2026-01-02")
    with pytest.raises(InvalidInput, match="since"):
        file_brain.search("kettle", since="2026-01-03", until="2026-01-01")
    with pytest.raises(InvalidInput, match="since"):
        file_brain.list(since="2026-01-03", until="2026-01-01")
    assert file_brain.stats()["retrievals"] == 0  # nothing recorded
    # an empty window of one instant is still a window
    assert [h.trace.content for h in file_brain.search("kettle", since="2026-01-02", until="2026-01-02")] == ["kettle"]
    db = str(tmp_path / "cli.db")
    assert main(["--brain", db, "--create", "add", "kettle"]) == 0
    capsys.readouterr()
    code = main(["--brain", db, "list", "--since", "2026-01-03", "--until", "2026-01-01"])
    out, err = capsys.readouterr()
    assert code != 0 and out == "" and len(err.strip().splitlines()) == 1


#: An int too big for a float: ``math.isfinite`` and ``float()`` raise OverflowError on it.
TOO_BIG_FOR_FLOAT = [10**400, -(10**400)]


@pytest.mark.parametrize("value", TOO_BIG_FOR_FLOAT, ids=["plus", "minus"])
@pytest.mark.parametrize("field", ["created_at", "due_at", "expires_at", "ttl"])
def test_an_int_too_big_for_a_float_is_invalid_input_on_add(file_brain: Brain, field: str, value: int) -> None:
    # Before: OverflowError ("int too large to convert to float") from math.isfinite.
    with pytest.raises(InvalidInput, match=field):
        file_brain.add("kettle", **{field: value})
    assert file_brain.stats()["live"] == 0


@pytest.mark.parametrize("value", TOO_BIG_FOR_FLOAT, ids=["plus", "minus"])
def test_an_int_too_big_for_a_float_is_invalid_input_as_a_read_time(file_brain: Brain, value: int) -> None:
    file_brain.add("kettle")
    with pytest.raises(InvalidInput, match="since"):
        file_brain.recent(since=value)
    with pytest.raises(InvalidInput, match="as_of"):
        file_brain.search("kettle", as_of=value)
    with pytest.raises(InvalidInput):
        file_brain.search("kettle", now=value)
    assert file_brain.stats()["retrievals"] == 0


@pytest.mark.parametrize("field", ["created_at", "updated_at", "last_accessed_at", "deleted_at", "valid_from",
                                   "expires_at", "due_at", "strength", "stability"])
def test_an_import_with_an_int_too_big_for_a_float_is_invalid_input(
        file_brain: Brain, tmp_path: Path, capsys: Any, field: str) -> None:
    bad = _export_with(file_brain, tmp_path, field, "9" * 400)
    _refused_by_import(tmp_path, bad, field)
    # the CLI: one line, exit 2, and the brain file the failed import created is removed
    db = tmp_path / "cli.db"
    code = main(["--brain", str(db), "import", str(bad)])
    out, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1 and field in err, err
    assert not db.exists()


def test_a_policy_number_too_big_for_a_float_is_invalid_input() -> None:
    from brainmem import Policy
    with pytest.raises(InvalidInput, match="weight_time"):
        Policy(weight_time=10**400)


def test_a_tokenizer_count_too_big_for_a_float_is_invalid_input(file_brain: Brain) -> None:
    file_brain.add("kettle", pinned=True)
    with pytest.raises(InvalidInput, match="tokenizer"):
        file_brain.context("kettle", tokenizer=lambda text: 10**400)


def _export_with(brain: Brain, tmp_path: Path, field: str, number: str) -> Path:
    """An export of one trace whose ``field`` is the JSON number ``number`` as written."""
    brain.add("kettle")
    export = tmp_path / "export.jsonl"
    brain.export(export)
    header, line = export.read_text().splitlines()
    record = json.loads(line)
    record["trace"][field] = "NUMBER"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(f"{header}\n{json.dumps(record).replace(chr(34) + 'NUMBER' + chr(34), number)}\n")
    return bad


def _refused_by_import(tmp_path: Path, bad: Path, field: str) -> None:
    """Importing ``bad`` into a new brain is InvalidInput naming ``field`` and adds nothing."""
    other = Brain(str(tmp_path / "other.db"))
    try:
        with pytest.raises(InvalidInput, match=field):
            other.import_jsonl(bad)
        assert other.stats()["live"] == 0
    finally:
        other.close()


@pytest.mark.parametrize("given", [{"since": 10**5000}, {"until": -(10**5000)}, {"limit": 10**5000}],
                         ids=["since", "until", "limit"])
def test_an_integer_too_long_to_print_is_invalid_input(file_brain: Brain, given: dict[str, Any]) -> None:
    # Python refuses to turn an int of over 4300 digits into text: the error message did
    # that and raised ValueError instead of naming the argument
    with pytest.raises(InvalidInput, match=next(iter(given))):
        file_brain.search("kettle", **given)
    with pytest.raises(InvalidInput, match="ttl"):
        file_brain.add("kettle", ttl=10**5000)
    with pytest.raises(InvalidInput, match="importance"):
        file_brain.add("kettle", importance=10**5000)
    assert file_brain.stats()["live"] == 0
