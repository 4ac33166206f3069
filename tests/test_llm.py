"""derive with an LLM: the real openai client against a local OpenAI-compatible server."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from loopback import JSONHandler, base_url, serving
from openai_stub import stub_server

from brainmem import Brain, Policy
from brainmem.llm import LLM, LLMError

T0 = 1_767_225_600.0
INSIGHT = "The user has a ginger cat called Miso and looks after it daily."


class FakeOpenAI(JSONHandler):
    mode = "ok"  # ok | error | slow | malformed | empty | negate | number | surrogate | invisible
    requests: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "body": body,
                                    "auth": self.headers.get("Authorization")})
        mode = type(self).mode
        if mode == "error":
            return self._send(500, b'{"error": {"message": "boom"}}')
        if mode == "slow":
            time.sleep(2.5)
        if mode == "malformed":
            return self._send(200, b'{"choices": [ this is not json')
        content = {"empty": "", "negate": "The user does not have a cat called Miso.",
                   "number": "The user feeds Miso 3 times a day.",
                   # valid JSON ("\\ud800"), but no Unicode text once decoded
                   "surrogate": "The user's cat Miso \ud800 sleeps a lot.",
                   # text, but nothing a person could read: zero-width spaces, a BOM
                   "invisible": "\u200b\u200b \ufeff\u2060"}.get(mode, INSIGHT)
        reply = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": content}}],
                 "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        self._send(200, json.dumps(reply).encode())


@pytest.fixture
def server() -> Iterator[str]:
    FakeOpenAI.mode = "ok"
    FakeOpenAI.requests = []
    with serving(FakeOpenAI) as httpd:
        yield base_url(httpd)


def _brain_with_cluster(path: Path, llm: object) -> tuple[Brain, list[str]]:
    brain = Brain(str(path), clock=lambda: T0, llm=llm)
    texts = ["The user's cat is called Miso. Miso is a ginger cat.",
             "The user feeds the cat Miso twice a day.",
             "Miso the cat sleeps on the user's keyboard."]
    ids = [brain.add(t).id for t in texts]
    for _ in range(2):
        hits = brain.search("Miso cat", limit=5)
        brain.feedback(hits.retrieval_id, used=ids)
    return brain, ids


def test_insight_comes_from_the_llm(server: str, tmp_path: Path) -> None:
    llm = LLM(base_url=server, model="test-model", api_key="sk-test", timeout=5)
    brain, ids = _brain_with_cluster(tmp_path / "b.brain", llm)
    with brain:
        report = brain.reflect()
        assert report.derived == 1 and report.derived_by == {"llm": 1} and report.llm_fallback is None
        insight = brain.get(report.derived_ids[0])
        assert insight.content == INSIGHT
        assert insight.metadata["method"] == "llm" and "test-model" in insight.metadata["llm"]
    (request,) = FakeOpenAI.requests
    assert request["path"] == "/v1/chat/completions" and request["body"]["model"] == "test-model"
    assert request["auth"] == "Bearer sk-test"
    prompt = request["body"]["messages"][-1]["content"]
    assert all(word in prompt for word in ("keyboard", "twice a day", "ginger"))


@pytest.mark.parametrize(("mode", "why"), [("error", "InternalServerError"), ("slow", "Timeout"),
                                           ("malformed", ""), ("empty", "empty")])
@pytest.mark.slow  # over 0.3 s: a subprocess, a property search or a real dataset
def test_failing_llm_falls_back_to_extractive(server: str, tmp_path: Path, mode: str, why: str) -> None:
    FakeOpenAI.mode = mode
    # the slow server answers after 2.5 s: a 0.25 s client timeout ends it as surely as 1 s
    llm = LLM(base_url=server, model="m", timeout=0.25 if mode == "slow" else 1.0, max_retries=0)
    brain, ids = _brain_with_cluster(tmp_path / "b.brain", llm)
    with brain:
        report = brain.reflect()  # the client timeout, not a hang, ends a slow LLM
        assert report.status == "ok" and report.derived == 1 and report.derived_by == {"extractive": 1}
        assert report.llm_fallback and why in report.llm_fallback
        insight = brain.get(report.derived_ids[0])
        assert insight.metadata["method"] == "extractive" and "Miso" in insight.content
        assert brain.reflect_log()[0]["report"]["llm_fallback"] == report.llm_fallback


def test_an_insight_that_is_not_unicode_falls_back(server: str, tmp_path: Path) -> None:
    # README: "when it fails (down, 500, timeout, malformed answer), insights are
    # extractive ... the run never fails for it". Before, a reply holding a lone surrogate
    # (valid JSON) made the insight's build_trace raise InvalidInput out of reflect.
    FakeOpenAI.mode = "surrogate"
    llm = LLM(base_url=server, model="m", timeout=5, max_retries=0)
    brain, ids = _brain_with_cluster(tmp_path / "b.brain", llm)
    with brain:
        report = brain.reflect()
        assert report.status == "ok" and report.derived_by == {"extractive": 1}
        assert report.llm_fallback and "Unicode" in report.llm_fallback
        assert "Miso" in brain.get(report.derived_ids[0]).content
        assert brain.check()["ok"] and brain.reflect().status == "ok"
    brain, _ = _brain_with_cluster(tmp_path / "c.brain", lambda texts: "Miso \udfff the cat")
    with brain:
        assert "Unicode" in (brain.reflect().llm_fallback or "")


def test_an_insight_with_no_visible_character_falls_back(server: str, tmp_path: Path) -> None:
    # An add of such text is InvalidInput ("no visible character"). Before, derive stored the
    # first source's text as an "llm" insight (derived_by {"llm": 1}) and said nothing.
    FakeOpenAI.mode = "invisible"
    llm = LLM(base_url=server, model="m", timeout=5, max_retries=0)
    brain, ids = _brain_with_cluster(tmp_path / "b.brain", llm)
    with brain:
        report = brain.reflect()
        assert report.status == "ok" and report.derived_by == {"extractive": 1}
        assert report.llm_fallback and "visible" in report.llm_fallback
        insight = brain.get(report.derived_ids[0])
        assert insight.metadata["method"] == "extractive" and "llm" not in insight.metadata
    brain, _ = _brain_with_cluster(tmp_path / "c.brain", lambda texts: "\u200b\u200d")
    with brain:
        assert "visible" in (brain.reflect().llm_fallback or "")


def test_unreachable_llm_falls_back(tmp_path: Path) -> None:
    llm = LLM(base_url="http://127.0.0.1:9/v1", model="m", timeout=1.0)
    brain, _ = _brain_with_cluster(tmp_path / "b.brain", llm)
    with brain:
        report = brain.reflect()
    assert report.derived == 1 and "Connection" in (report.llm_fallback or "")


def test_callable_llm_and_error(tmp_path: Path) -> None:
    brain, _ = _brain_with_cluster(tmp_path / "b.brain", lambda texts: f"Notes about Miso: {texts[1]}")
    with brain:
        report = brain.reflect()
        assert brain.get(report.derived_ids[0]).content.startswith("Notes about Miso: ")

    def broken(texts: list[str]) -> str:
        raise ValueError("nope")

    brain, _ = _brain_with_cluster(tmp_path / "c.brain", broken)
    with brain:
        assert "ValueError: nope" in brain.reflect().llm_fallback


def test_from_env() -> None:
    assert LLM.from_env({}) is None
    llm = LLM.from_env({"BRAINMEM_LLM_BASE_URL": "http://x/v1", "OPENAI_API_KEY": "k",
                        "BRAINMEM_LLM_TIMEOUT": "3"})
    assert llm is not None and (llm.base_url, llm.api_key, llm.timeout) == ("http://x/v1", "k", 3.0)
    assert "k" not in repr(llm)


def test_insight_raises_llmerror(server: str) -> None:
    FakeOpenAI.mode = "error"
    with pytest.raises(LLMError):
        LLM(base_url=server, model="m", timeout=1).insight(["a", "b"])


@pytest.mark.parametrize(("mode", "why"), [("negate", "adds negation"), ("number", "introduces numbers")])
def test_insight_contradicting_its_sources_is_refused(server: str, tmp_path: Path, mode: str, why: str) -> None:
    """The guard of issue 16: an LLM insight that adds a negation or a number its sources
    do not have is not written; the extractive summary (source sentences verbatim) is."""
    FakeOpenAI.mode = mode
    llm = LLM(base_url=server, model="m", timeout=5)
    brain, ids = _brain_with_cluster(tmp_path / "b.brain", llm)
    with brain:
        report = brain.reflect()
        assert report.derived == 1 and report.derived_by == {"extractive": 1}
        assert any(why in note for note in report.notes)
        insight = brain.get(report.derived_ids[0])
        assert "not" not in insight.content.split() and "3" not in insight.content
        sources = [brain.get(i).content for i in ids]
        from brainmem.similarity import sentences

        assert all(any(s in src for src in sources) for s in sentences(insight.content))
        edges = set(brain._store.execute("SELECT dst FROM edges WHERE src = ? AND kind = 'derived_from'",
                                         (insight.id,)))
        assert {e[0] for e in edges} == set(ids)


RENT = ["The user rents a small flat in Lisbon for 1450 euros a month with a balcony facing the river.",
        "The flat in Lisbon that the user rents has a balcony and costs 1450 euros a month in total.",
        "The user pays 1450 euros a month for the Lisbon flat and likes the balcony over the river."]


@pytest.mark.parametrize("reply", [
    "The user rents a flat in Lisbon with a lovely balcony over the river for 1450 euros a month.",
    " ".join(["The user rents a flat in Lisbon with a balcony for 1450 euros a month."] * 5)])
def test_an_insight_is_never_cut_inside_a_word_or_over_the_content_limit(tmp_path: Path, reply: str) -> None:
    """derive cut every insight at a quarter of Policy.max_content_bytes in characters,
    after the contradiction check: an LLM insight that fitted the limit was stored cut
    mid-number ("... for 14"), a number none of its sources has, and so was the extractive
    summary. Now an insight that fits is kept whole; an LLM insight over the limit is
    refused for the extractive one, whose whole sentences are kept while they fit."""
    policy = replace(Policy(), max_content_bytes=300)
    with stub_server(lambda body: {"role": "assistant", "content": reply}) as url, \
            Brain(str(tmp_path / "b.brain"), clock=lambda: T0, policy=policy,
                  llm=LLM(base_url=url, model="m", timeout=5)) as brain:
        ids = [brain.add(t).id for t in RENT]
        for _ in range(2):
            brain.feedback(brain.search("Lisbon flat", limit=5).retrieval_id, used=ids)
        report = brain.reflect()
        assert report.status == "ok" and report.derived == 1
        insight = brain.get(report.derived_ids[0])
        assert len(insight.content.encode()) <= policy.max_content_bytes
        if len(reply.encode()) <= policy.max_content_bytes:
            assert insight.content == reply and report.derived_by == {"llm": 1}
        else:
            assert report.derived_by == {"extractive": 1}
            assert any("max_content_bytes" in note for note in report.notes)
            from brainmem.similarity import sentences

            assert sentences(insight.content) and all(s in RENT for s in sentences(insight.content))


def test_an_extractive_insight_over_a_smaller_limit_is_cut_between_words(tmp_path: Path) -> None:
    """Sources stored under a larger Policy.max_content_bytes than the brain now has: the
    insight is cut at the last whole word that fits, never inside "1450"."""
    path = str(tmp_path / "b.brain")
    with Brain(path, clock=lambda: T0) as brain:
        ids = [brain.add(t).id for t in RENT]
        for _ in range(2):
            brain.feedback(brain.search("Lisbon flat", limit=5).retrieval_id, used=ids)
    with Brain(path, clock=lambda: T0, policy=replace(Policy(), max_content_bytes=44)) as brain:
        report = brain.reflect()
        assert report.status == "ok" and report.derived == 1
        content = brain.get(report.derived_ids[0]).content
        assert len(content.encode()) <= 44
        assert any(t.startswith(content + " ") for t in RENT)


def _cut_reply(content: str) -> Any:
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        return {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "length",
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 200, "total_tokens": 201}}
    return respond


def test_an_insight_the_server_cut_at_max_tokens_falls_back(tmp_path: Path) -> None:
    """A wordy model stopped by max_tokens (finish_reason "length") returned half a
    sentence, and derive stored it as the insight ("... took it to the v"). A reply cut
    short is now an LLM failure: the insight is extractive and the report says why."""
    cut = "The user has a ginger cat called Miso, feeds it twice a day and once took it to the v"
    with stub_server(_cut_reply(cut)) as url:
        brain, ids = _brain_with_cluster(tmp_path / "b.brain", LLM(base_url=url, model="m", timeout=5))
        with brain:
            report = brain.reflect()
            assert report.derived == 1 and report.derived_by == {"extractive": 1}
            assert report.llm_fallback and "max_tokens" in report.llm_fallback
            assert brain.get(report.derived_ids[0]).content != cut


def test_an_insight_over_the_longest_kept_is_refused_not_cut(tmp_path: Path) -> None:
    """An insight over MAX_INSIGHT_CHARS (a custom backend with no token limit) was cut at
    2,000 characters, inside a word, and stored so. It is now an LLM failure like a reply
    the server cut: the insight is extractive and the report says why."""
    from brainmem.llm import MAX_INSIGHT_CHARS

    wordy = ("The user's cat Miso is ginger and sleeps on the keyboard. " * 40).strip()
    assert len(wordy) > MAX_INSIGHT_CHARS
    brain, _ = _brain_with_cluster(tmp_path / "b.brain", lambda texts: wordy)
    with brain:
        report = brain.reflect()
        assert report.derived_by == {"extractive": 1}
        assert report.llm_fallback and "MAX_INSIGHT_CHARS" in report.llm_fallback


def test_one_long_memory_does_not_push_the_insight_prompt_past_the_context(tmp_path: Path) -> None:
    """Each memory went into the insight prompt whole: a cluster holding one long memory (a
    pasted document, up to 64 KiB) overflowed the model's context, the call failed, and the
    run's later clusters, every scope's, went extractive too. Each memory is now shown cut
    to INSIGHT_SOURCE_CHARS; the stub refuses prompts over a small context, as a server does."""
    def respond(body: dict[str, Any]) -> Any:
        if len(body["messages"][1]["content"]) > 16_000:
            return 400
        return {"role": "assistant", "content": INSIGHT}

    with stub_server(respond) as url:
        brain = Brain(str(tmp_path / "b.brain"), clock=lambda: T0, llm=LLM(base_url=url, model="m", timeout=5))
        with brain:
            texts = ["The user's cat is called Miso. " + "Miso purrs and naps all day. " * 1500,
                     "The user feeds the cat Miso twice a day.", "Miso the cat sleeps on the user's keyboard."]
            ids = [brain.add(t).id for t in texts]
            for _ in range(2):
                brain.feedback(brain.search("Miso cat", limit=5).retrieval_id, used=ids)
            report = brain.reflect()
            assert report.llm_fallback is None and report.derived_by == {"llm": 1}


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"timeout": 0}, "LLM timeout must be a positive number of seconds"),
    ({"timeout": float("nan")}, "LLM timeout must be a positive number of seconds"),
    ({"timeout": float("inf")}, "LLM timeout must be a positive number of seconds"),
    ({"max_retries": -1}, "LLM max_retries must be an integer >= 0"),
    ({"max_tokens": 0}, "LLM max_tokens must be an integer >= 1"),
    ({"temperature": float("nan")}, "LLM temperature must be a number"),
    ({"model": " "}, "LLM model must be a model name"),
])
def test_an_llm_made_with_a_bad_setting_is_refused(kwargs: dict, words: str) -> None:
    # LLM(...) took any value and BRAINMEM_LLM_TIMEOUT was checked only by from_env: every
    # reflect then failed its request and quietly wrote extractive insights instead.
    from brainmem import InvalidInput

    with pytest.raises(InvalidInput, match=words):
        LLM(base_url="http://127.0.0.1:9/v1", **kwargs)


def test_blank_llm_variables_are_unset() -> None:
    # "  " was taken as a base URL (or model name) every request then failed on
    assert LLM.from_env({"BRAINMEM_LLM_BASE_URL": "  ", "BRAINMEM_LLM_MODEL": "\t"}) is None
    llm = LLM.from_env({"BRAINMEM_LLM_BASE_URL": " http://x/v1 ", "BRAINMEM_LLM_MODEL": " "})
    assert llm is not None and (llm.base_url, llm.model) == ("http://x/v1", "gpt-4o-mini")


@pytest.mark.parametrize(("llm", "words"), [
    ("gpt-4o-mini", "a model name is LLM"),
    (42, "int"),
    (LLM, "the class LLM, not an instance"),
])
def test_a_brain_refuses_an_llm_it_could_never_call(tmp_path: Path, llm: object, words: str) -> None:
    # Brain(llm="gpt-4o-mini") opened, then every reflect quietly wrote extractive
    # insights ("llm must have an insight(texts) method") and observe extracted nothing
    from brainmem import InvalidInput

    with pytest.raises(InvalidInput, match=words):
        Brain(str(tmp_path / "b.brain"), llm=llm)
    assert not (tmp_path / "b.brain").exists()


def test_an_llm_for_openai_itself_takes_the_key_from_openai_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    # LLM(model=...) with no base_url is OpenAI, yet the client was given the key
    # "not-needed" over $OPENAI_API_KEY: every request was a 401 and reflect quietly wrote
    # extractive insights
    from brainmem import InvalidInput

    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert LLM(model="gpt-4o-mini")._openai().api_key == "sk-from-env"
    assert LLM(model="gpt-4o-mini", api_key="sk-given")._openai().api_key == "sk-given"
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(InvalidInput, match="OPENAI_API_KEY"):
        LLM(model="gpt-4o-mini")
    with pytest.raises(InvalidInput, match="OPENAI_API_KEY"):
        LLM.from_env({"BRAINMEM_LLM_MODEL": "gpt-4o-mini"})
    assert LLM(base_url="http://127.0.0.1:9/v1")._openai().api_key == "not-needed"  # a local server


class BusyOpenAI(FakeOpenAI):
    """A server that answers 429 with ``retry_after`` ``busy`` times, then as FakeOpenAI."""
    retry_after = "30"
    busy = 10

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        if type(self).busy > 0:
            type(self).busy -= 1
            self.rfile.read(int(self.headers["Content-Length"]))
            type(self).requests.append({"path": self.path})
            return self._send(429, b'{"error": {"message": "slow down"}}', {"retry-after": type(self).retry_after})
        return super().do_POST()


def test_a_retry_after_past_the_llm_timeout_fails_at_once_and_a_short_one_is_waited() -> None:
    """A 429's Retry-After held an LLM call up to a minute a retry past its timeout (the
    openai client waits what the server asks); it is waited only while it ends inside it.
    (A 5 s timeout, not 0.5 s: on a busy machine the first answer alone took a 0.5 s
    timeout's room for the short wait; and the first call, timed, imported openai: seconds.)"""
    BusyOpenAI.mode, BusyOpenAI.requests, BusyOpenAI.busy, BusyOpenAI.retry_after = "ok", [], 0, "60"
    with serving(BusyOpenAI) as httpd:
        llm = LLM(base_url=base_url(httpd), model="m", timeout=5, max_retries=2)
        assert llm.insight(["a warm-up"]) == INSIGHT  # the client is made before the clock starts
        BusyOpenAI.requests, BusyOpenAI.busy = [], 10
        start = time.monotonic()
        with pytest.raises(LLMError, match="retry in 60 s, past the 5 s timeout"):
            llm.insight(["The user's cat is called Miso."])
        assert time.monotonic() - start < 5 and len(BusyOpenAI.requests) == 1
        BusyOpenAI.requests, BusyOpenAI.busy, BusyOpenAI.retry_after = [], 1, "0.05"
        assert llm.insight(["The user's cat is called Miso."]) == INSIGHT
        assert len(BusyOpenAI.requests) == 2  # waited, then answered
        BusyOpenAI.requests, BusyOpenAI.busy = [], 10
        with pytest.raises(LLMError, match="RateLimitError"):
            LLM(base_url=base_url(httpd), model="m", timeout=5, max_retries=1).insight(["a"])
        assert len(BusyOpenAI.requests) == 2  # the first try and the one retry
