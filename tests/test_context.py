"""Context assembly: budget split, omissions with reasons, oversize policies, tool-call groups."""

from __future__ import annotations

from typing import Any

import pytest

from langmem_tiers import ConfigError, MemoryConfig, Message, RecallHit, ToolCall, WordCounter
from langmem_tiers.context import MEMORY_HEADER, SUMMARY_HEADER, WindowMessage, assemble, longest_fitting, recall_lines
from langmem_tiers.journal.base import Namespace
from langmem_tiers.tokens import TiktokenCounter, count_messages, load_encoding

WORDS = WordCounter()
CONFIG = MemoryConfig(
    context_tokens=400, window_tokens=100, summary_tokens=40, recall_tokens=100, summary_retry_base_s=0
)


def wm(role: str, text: str, i: int, **kw: Any) -> WindowMessage:
    m = Message(role, text, id=i, **kw)
    return WindowMessage(m, WORDS.count_message(m))


def hit(i: int, text: str) -> RecallHit:
    return RecallHit(record_id=i, kind="turn", text=text, score=1.0 / i, parts={}, namespace=Namespace("s"))


def window(turns: int, words: int = 10) -> list[WindowMessage]:
    out = []
    for t in range(turns):
        out.append(wm("user", " ".join(f"u{t}" for _ in range(words)), 2 * t + 1))
        out.append(wm("assistant", " ".join(f"a{t}" for _ in range(words)), 2 * t + 2))
    return out


def test_everything_fits_and_tokens_add_up() -> None:
    ctx = assemble(
        window=window(3),
        summary="earlier we met",
        pinned=["name is Ada"],
        hits=[hit(1, "old stuff")],
        config=CONFIG,
        counter=WORDS,
    )
    assert ctx.left_out == ()
    assert ctx.messages[0].role == "system"
    assert ctx.messages[0].text.startswith(MEMORY_HEADER)
    assert SUMMARY_HEADER + "\nearlier we met" in ctx.messages[0].text
    assert [m.id for m in ctx.messages[1:]] == list(range(1, 7))
    assert ctx.tokens.total == count_messages(list(ctx.messages), WORDS)
    assert ctx.tokens.summary == 3
    assert ctx.tokens.window == sum(w.tokens for w in window(3))
    assert ctx.tokens.budget == 400
    assert ctx.summary == "earlier we met"
    assert "left out" not in ctx.explain()
    assert ctx.to_openai()[1] == {"role": "user", "content": " ".join(["u0"] * 10)}


@pytest.mark.parametrize("role", ["system", "user", "assistant"])
def test_summary_role_is_configurable(role: str) -> None:
    ctx = assemble(
        window=window(1), summary="s", pinned=[], hits=[], config=CONFIG.with_changes(summary_role=role), counter=WORDS
    )
    assert ctx.messages[0].role == role
    assert ctx.messages[0].metadata == {"langmem_tiers": "memory"}


def test_no_memory_message_when_nothing_to_remember() -> None:
    ctx = assemble(window=window(1), summary="", pinned=[], hits=[], config=CONFIG, counter=WORDS)
    assert [m.role for m in ctx.messages] == ["user", "assistant"]


def test_recall_share_and_priorities_under_a_short_budget() -> None:
    hits = [hit(i, " ".join(["fact"] * 30)) for i in range(1, 6)]  # 32 words each, share 100 -> 3 fit
    fixed = CONFIG.with_changes(recall_uses_spare=False)
    ctx = assemble(
        window=window(4), summary="summary words here", pinned=["pin"], hits=hits, config=fixed, counter=WORDS
    )
    share = [o for o in ctx.left_out if o.tier == "recall"]
    assert [o.ids for o in share] == [(4,), (5,)]
    assert all("recall share (100 tokens)" in o.reason for o in share)
    assert len(ctx.recalled) == 3
    # Shrink the budget: recall goes first, then the oldest turns, then the summary, then pins.
    sizes = []
    for budget in (150, 90, 40, 35, 31):
        ctx = assemble(
            window=window(4),
            summary="summary words here",
            pinned=["pin"],
            hits=hits,
            config=CONFIG,
            counter=WORDS,
            budget=budget,
        )
        assert ctx.tokens.total <= budget
        assert ctx.messages[-1].id == 8
        assert ctx.messages[-2].id == 7  # the current turn stays
        sizes.append(len(ctx.left_out))
        tiers = [o.tier for o in ctx.left_out]
        if "window" in tiers:
            assert "recall" in tiers
            assert all(o.reason == "over budget (oldest turn first)" for o in ctx.left_out if o.tier == "window")
            window_ids = [o.ids for o in ctx.left_out if o.tier == "window"]
            assert window_ids == sorted(window_ids)
        if "summary" in tiers:
            assert not any(m.id in (1, 2, 3, 4, 5, 6) for m in ctx.messages)
        if "pinned" in tiers:
            assert "summary" in tiers
    assert sizes == sorted(sizes)
    assert "left out window" in ctx.explain()


@pytest.mark.parametrize("n", [0, 1, 2, 5, 36, 64])
def test_longest_fitting_finds_what_a_scan_from_the_top_finds_in_few_tries(n: int) -> None:
    for limit in range(-1, n + 1):  # the largest count that fits (-1: not even none)
        tried: list[int] = []

        def fits(m: int, limit: int = limit) -> bool:
            tried.append(m)
            return m <= limit

        assert longest_fitting(n, fits) == max(limit, 0)
        assert tried[0] == n
        if limit == n:
            assert tried == [n]  # everything fits: one rendering, as before any trim
        elif limit == n - 1 and n > 0:
            assert tried == [n, n - 1]  # one hit over: two renderings
        else:
            assert len(tried) <= 2 * max(n, 1).bit_length() + 2


def test_recall_over_the_whole_budget_keeps_its_best_hits_that_fit() -> None:
    """The spare budget's fill is an estimate (a hit's text and a join); each "..." line it leaves out
    costs a token more, so 600 short hits pass the budget by many: the worst leave, by rank, until the
    section fits, each with a reason, in a few renderings of the memory message rather than one per hit."""
    counter = TiktokenCounter(load_encoding("cl100k_base"))
    renderings = []

    class Counting:
        key = counter.key

        def count_text(self, text: str) -> int:
            return counter.count_text(text)

        def count_message(self, message: Message) -> int:
            renderings.append(message)
            return counter.count_message(message)

    turns = [WindowMessage(w.message, counter.count_message(w.message)) for w in window(2)]
    hits = [hit(i, f"w{i}") for i in range(1, 601)]
    config = CONFIG.with_changes(context_tokens=2000)
    ctx = assemble(window=turns, summary="", pinned=[], hits=hits, config=config, counter=Counting())
    assert ctx.tokens.total <= 2000
    kept = [h.record_id for h in ctx.recalled]
    assert kept == list(range(1, len(kept) + 1))  # the best ones
    dropped = [o for o in ctx.left_out if o.tier == "recall"]
    assert sorted(kept + [o.ids[0] for o in dropped]) == list(range(1, 601))
    over_budget = [o for o in dropped if o.reason == "over budget"]
    assert len(over_budget) > 50
    assert len(renderings) <= 2 * len(hits).bit_length() + 2
    # One more hit would not have fitted: the fill is the largest that does.
    roomy = CONFIG.with_changes(context_tokens=20_000, recall_tokens=10_000, recall_uses_spare=False)
    more = assemble(window=turns, summary="", pinned=[], hits=hits[:len(kept) + 1], config=roomy, counter=counter)
    assert more.tokens.total > 2000


def test_tool_call_groups_stay_intact() -> None:
    call = ToolCall("c1", "weather", '{"city": "Paris"}')
    w = [
        wm("user", "one two three", 1),
        WindowMessage(Message("assistant", "", tool_calls=(call,), id=2), 20),
        wm("tool", "sunny and warm", 3, tool_call_id="c1"),
        wm("assistant", "It is sunny", 4),
        wm("user", "and tomorrow", 5),
    ]
    for budget in range(20, 80, 3):
        ctx = assemble(window=w, summary="", pinned=[], hits=[], config=CONFIG, counter=WORDS, budget=budget)
        ids = [m.id for m in ctx.messages]
        assert (2 in ids) == (3 in ids) == (1 in ids) == (4 in ids)
        assert ids[-1] == 5
    ctx = assemble(window=w, summary="", pinned=[], hits=[], config=CONFIG, counter=WORDS)
    openai = ctx.to_openai()
    assert openai[1]["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}
    ]
    assert openai[2] == {"role": "tool", "content": "sunny and warm", "tool_call_id": "c1"}


def _oversize() -> list[WindowMessage]:
    return [
        wm("user", "hi", 1),
        wm("assistant", "hello", 2),
        wm("user", " ".join(f"w{i}" for i in range(300)), 3),
        wm("tool", "x " * 5, 4, tool_call_id="c"),
    ]


def test_oversize_truncate() -> None:
    ctx = assemble(window=_oversize(), summary="s", pinned=[], hits=[], config=CONFIG, counter=WORDS, budget=100)
    assert ctx.truncated == (3,)
    assert ctx.tokens.total <= 100
    user = next(m for m in ctx.messages if m.id == 3)
    assert "truncated to fit the context; message 3 is whole in the journal" in user.text
    assert user.text.startswith("w0 ")
    assert user.text.rstrip().endswith("w299")
    assert "truncated to fit" in ctx.explain()


def test_truncate_never_silently_exceeds_the_budget() -> None:
    try:
        ctx = assemble(window=window(4), summary="", pinned=[], hits=[], config=CONFIG, counter=WORDS, budget=30)
    except ConfigError:
        return
    assert ctx.tokens.total <= 30


def test_oversize_keep() -> None:
    ctx = assemble(
        window=_oversize(),
        summary="s",
        pinned=["p"],
        hits=[],
        counter=WORDS,
        budget=100,
        config=CONFIG.with_changes(oversize_policy="keep"),
    )
    assert ctx.truncated == ()
    assert ctx.tokens.total > 100
    assert [m.id for m in ctx.messages] == [3, 4]
    assert {o.tier for o in ctx.left_out} == {"window", "summary", "pinned"}


def test_oversize_error() -> None:
    with pytest.raises(ConfigError, match="oversize_policy='truncate'"):
        assemble(
            window=_oversize(),
            summary="",
            pinned=[],
            hits=[],
            counter=WORDS,
            budget=100,
            config=CONFIG.with_changes(oversize_policy="error"),
        )


def test_budget_below_priming_refused() -> None:
    with pytest.raises(ConfigError, match="reply priming"):
        assemble(window=window(1), summary="", pinned=[], hits=[], config=CONFIG, counter=WORDS, budget=3)


def test_context_through_memory(make_memory: Any) -> None:
    memory = make_memory()
    for i in range(8):
        memory.add("user", f"turn {i} " + "word " * 20)
        memory.add("assistant", "", tool_calls=[{"id": f"c{i}", "name": "f", "arguments": "{}"}])
        memory.add("tool", "result " * 5, tool_call_id=f"c{i}")
    ctx = memory.context()
    assert ctx.messages[0].role == "system"
    assert SUMMARY_HEADER in ctx.messages[0].text
    assert ctx.summary == memory.summary
    body = ctx.messages[1:]
    assert body[0].role == "user"
    for m in body:
        if m.role == "tool":
            assert any(c.id == m.tool_call_id for b in body for c in b.tool_calls)
    small = memory.context(budget=60)
    assert small.tokens.total <= 60
    assert small.tokens.budget == 60


def test_recall_fills_what_an_empty_window_leaves() -> None:
    """A fresh session (no window, no summary) asking about the past: recall may use the whole budget."""
    hits = [hit(i, " ".join(["fact"] * 30)) for i in range(1, 11)]  # 32 words each
    current = window(1)[:1]
    spare = assemble(window=current, summary="", pinned=[], hits=hits, config=CONFIG, counter=WORDS)
    fixed = assemble(window=current, summary="", pinned=[], hits=hits,
                     config=CONFIG.with_changes(recall_uses_spare=False), counter=WORDS)
    assert len(fixed.recalled) == 3  # within recall_tokens (100)
    assert len(spare.recalled) > len(fixed.recalled)
    assert spare.tokens.total <= CONFIG.context_tokens
    assert [h.record_id for h in spare.recalled] == list(range(1, len(spare.recalled) + 1))  # best first


def test_recall_gets_what_a_short_profile_leaves_of_its_share() -> None:
    """A profile of one short fact takes its own tokens, not its whole share: the rest goes to recall."""
    from langmem_tiers.semantic.profile import ProfileLine

    config = CONFIG.with_changes(profile_tokens=200)
    hits = [hit(i, " ".join([f"w{i}"] * 40)) for i in range(1, 9)]  # 40 words each
    profile = [ProfileLine(99, "- (fact) likes green tea")]
    ctx = assemble(window=[], summary="", pinned=[], hits=hits, config=config, counter=WORDS, profile=profile)
    assert [p.record_id for p in ctx.profile] == [99]
    assert ctx.tokens.profile == 5
    # Of 400 tokens, the profile takes 5: all eight hits fit (a reserved 200 left room for three).
    assert len(ctx.recalled) == 8
    assert ctx.tokens.total <= 400


MONDAY = 1683554160.0  # Mon 2023-05-08


def turn(i: int, text: str, ns: str, messages: tuple[int, ...], at: float = MONDAY, kind: str = "turn") -> RecallHit:
    return RecallHit(record_id=i, kind=kind, text=text, score=1.0 / i, parts={}, namespace=Namespace(ns),
                     message_ids=messages, created_at=at)


def test_turns_of_one_conversation_and_day_share_one_label_in_the_order_said() -> None:
    """Hits come best first; the memory message shows a conversation's turns of one day under one label,
    in the order they were said, "..." where turns between them are not shown; other kinds keep a line."""
    hits = [
        turn(1, "user: Miso likes the blue kitchen.", "trip", (5, 6), MONDAY + 60),
        turn(2, "user: I sold the car.", "cars", (20, 21), MONDAY + 86_400),
        turn(3, "user: I adopted a cat named Miso.", "trip", (1, 2)),
        turn(4, "user: The vet is Dr. Okafor.", "trip", (9, 10), MONDAY + 120, kind="memory"),
        turn(5, "user: We painted the kitchen blue.", "trip", (3, 4), MONDAY + 30),
        turn(6, "user: Miso hid under the bed.", "trip", (11, 12), MONDAY + 200),
    ]
    ctx = assemble(window=[], summary="", pinned=[], hits=hits, config=CONFIG, counter=WORDS,
                   session=Namespace("today"))
    assert [h.record_id for h in ctx.recalled] == [1, 2, 3, 4, 5, 6]  # every hit, still best first
    section = ctx.messages[0].text.split("Recalled from earlier conversations:\n", 1)[1]
    assert section == (
        "- [Mon 2023-05-08, another conversation] user: I adopted a cat named Miso.\n"
        "user: We painted the kitchen blue.\n"
        "user: Miso likes the blue kitchen.\n"
        "...\n"
        "user: Miso hid under the bed.\n"
        "- [Tue 2023-05-09, another conversation] user: I sold the car.\n"
        "- [Mon 2023-05-08] (memory) user: The vet is Dr. Okafor."
    )
    assert ctx.tokens.recall == WORDS.count_text(section)


def test_one_label_per_conversation_and_day_lets_more_turns_fit() -> None:
    """A turn under a label already written costs its text alone: within one share more turns of one
    conversation fit than when each carried its own label, and the share still holds."""
    texts = [" ".join(f"w{i}" for _ in range(10)) for i in range(1, 13)]
    same_day = [turn(i, t, "trip", (2 * i, 2 * i + 1), MONDAY + i) for i, t in enumerate(texts, 1)]
    other_days = [turn(i, t, f"trip{i}", (2 * i, 2 * i + 1), MONDAY + i * 86_400) for i, t in enumerate(texts, 1)]
    fixed = CONFIG.with_changes(recall_uses_spare=False)  # a share of recall_tokens (100)
    grouped = assemble(window=[], summary="", pinned=[], hits=same_day, config=fixed, counter=WORDS,
                       session=Namespace("today"))
    apart = assemble(window=[], summary="", pinned=[], hits=other_days, config=fixed, counter=WORDS,
                     session=Namespace("today"))
    # A labelled line is 15 words ("- [Mon 2023-05-08, another conversation]" and 10), a turn under it 10.
    assert len(apart.recalled) == 6
    assert len(grouped.recalled) == 8
    assert grouped.tokens.recall <= 100
    assert all(t in grouped.messages[0].text for t in texts[:8])


def test_recall_section_holds_its_share_exactly_with_gaps_between_turns() -> None:
    """With the share held to ``recall_tokens``, turns of one conversation with turns between them (each
    shown after a "..." line) still fit the share by the real tokenizer's count: the fill's estimate is
    checked against the lines it picked, and the worst hits leave while the section passes the share."""
    counter = TiktokenCounter(load_encoding("o200k_base"))
    # Every other turn of one conversation and day: each after the first is shown after "...".
    hits = [turn(i, f"user: item {i} is in box {i}", "trip", (4 * i, 4 * i + 1), MONDAY + i) for i in range(1, 41)]
    for share in (60, 100, 150):
        fixed = CONFIG.with_changes(recall_uses_spare=False, recall_tokens=share, context_tokens=1000)
        ctx = assemble(window=[], summary="", pinned=[], hits=hits, config=fixed, counter=counter,
                       session=Namespace("today"))
        section = ctx.messages[0].text.split("Recalled from earlier conversations:\n", 1)[1]
        assert "...\n" in section
        assert ctx.tokens.recall == counter.count_text(section) <= share
        # Filled, not starved: one more hit would not have fitted.
        more = recall_lines(hits[: len(ctx.recalled) + 1], Namespace("today"))
        assert counter.count_text("\n".join(more)) > share
