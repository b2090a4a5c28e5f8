"""An opinion as data: its JSON, as the ledger and the judge cache keep it."""

from __future__ import annotations

import pytest

from assay.judging.opinion import Opinion

CHAT = Opinion(raw="pass\nfine", model="judge-model", prompt_digest="sha256:ab",
               parameters={"temperature": 0.0}, input_tokens=10, output_tokens=2,
               cost_usd=0.001, latency_s=0.5)


def test_a_chat_opinion_has_no_stream_and_its_cost_is_inferred() -> None:
    record = CHAT.to_json()
    assert "stream" not in record
    assert record["cost_evidence"] == "inferred"
    assert Opinion.from_json(record) == CHAT


def test_a_hosts_opinion_keeps_its_stream_and_its_cost_is_observed() -> None:
    opinion = Opinion(raw="pass", model="claude-x", prompt_digest="sha256:ab", cost_usd=0.002,
                      cost_observed=True, stream='{"type":"result"}')
    record = opinion.to_json()
    assert (record["stream"], record["cost_evidence"]) == ('{"type":"result"}', "observed")
    assert Opinion.from_json(record) == opinion


def test_no_cost_is_unavailable_whoever_would_have_reported_it() -> None:
    opinion = Opinion(raw=None, model="claude-x", prompt_digest="d", cost_observed=True,
                      error="timed out after 1s")
    assert opinion.to_json()["cost_evidence"] == "unavailable"


def test_a_stream_that_is_not_text_is_not_a_stored_opinion() -> None:
    with pytest.raises(ValueError, match="not a stored opinion"):
        Opinion.from_json({**CHAT.to_json(), "stream": ["a", "b"]})
