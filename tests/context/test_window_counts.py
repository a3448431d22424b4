"""The window keeps its token counts: what it holds is what a fresh count gives, through every way
the window changes, and planning under ``max_context_tokens`` from held counts archives exactly
what planning by recounting the assembled window archives.

The recounting reference is the same system counting with a Python ``counter`` that gives each
message its exact ``memci.tokens`` count: a caller's counter cannot be memoised, so that system
counts its window afresh on every plan. A counter adds no reply priming, so its budget is the
priming less."""

from __future__ import annotations

import json
from typing import Any

import memci
import pytest
from context_helpers import DictStorage, FixedSummarizer, assistant, calling, tool, user
from hypothesis import given, settings
from hypothesis import strategies as st
from memci import tokens
from memci.context.summary import PageSummary

Message = dict[str, Any]
PRIMING = tokens.reply_priming()


def exact(message: Message) -> int:
    """Each message's exact count, from Python: makes the system recount its window every time."""
    return tokens.count_message(message)


class Flaky(FixedSummarizer):
    """Refuses to summarise while ``failing``: what it was asked to archive is taken back."""

    failing = False

    def summarize(self, page: memci.Page) -> PageSummary:
        if self.failing:
            raise RuntimeError("no summary now")
        return super().summarize(page)


def thinking(n: int) -> Message:
    return {
        "role": "assistant",
        "content": [{"type": "thinking", "thinking": f"weigh option {n} " * 6}, {"type": "text", "text": f"ok {n}"}],
    }


def tool_results(n: int) -> Message:
    """A user message of tool results: it joins the open page and opens no turn."""
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": f"{n}"}]}


def message(kind: int, n: int) -> Message:
    return [
        user(f"question {n}: how about item {n} and its parts?"),
        assistant(f"answer {n} " * (n % 4 + 1)),
        calling(f"c{n}"),
        tool(f"c{n}", f"item {n} is {'fine ' * (n % 3 + 1)}"),
        thinking(n),
        tool_results(n),
    ][kind]


def assert_held_counts_are_fresh(ctx: memci.ContextSystem) -> None:
    """Every window the plan can choose (k oldest pages left out) costs what counting it gives."""
    window = ctx._window
    held = window.tokens_without_oldest(ctx.encoding)
    system = window.messages()[: window.system_len]
    pages = [window.page(i) for i in window.page_indices()]
    fresh = [tokens.count_messages(system + [m for p in pages[k:] for m in p]) for k in range(len(pages) + 1)]
    assert held == fresh
    contents = ctx.contents_text()
    sent = ctx.count_tokens(ctx._assemble(contents))
    assert ctx.token_count() == sent


def observed(ctx: memci.ContextSystem) -> str:
    return json.dumps([ctx.contents_text(), [p.messages() for p in ctx.pages], ctx.dropped], default=repr)


Step = tuple[str, int]
adds = st.tuples(st.just("add"), st.integers(0, 5))
steps = st.lists(
    st.one_of(
        adds,
        adds,
        adds,
        st.tuples(st.just("extend"), st.integers(1, 8)),
        st.tuples(st.sampled_from(["pop", "clear", "forget", "recall", "fail", "load", "end"]), st.just(0)),
    ),
    min_size=4,
    max_size=40,
)


def run(ctx: memci.ContextSystem, step: Step, n: int, batch: list[Message], summarizer: Flaky) -> memci.ContextSystem:
    """Take ``step`` (the ``n``-th) on ``ctx``; the system after it (``load`` gives a new one)."""
    op, arg = step
    if op == "add":
        ctx.add(message(arg, n))
    elif op == "extend":
        ctx.extend(batch)
    elif op == "pop":
        ctx.pop()
    elif op in ("clear", "forget"):
        ctx.clear(forget=op == "forget")
    elif op == "recall":
        if ctx.contents:
            page = ctx.recall(ctx.contents[0].index)
            ctx.add(tool_results(page.index))
    elif op == "fail":  # a page must be archived and its summary fails: the opening is taken back
        summarizer.failing = True
        try:
            for _ in range(ctx.active_pages):
                ctx.add(user(f"request {n}"))
        finally:
            summarizer.failing = False
    elif op == "load":
        ctx.save()
        return type(ctx).load(ctx._log.storage, summarizer=summarizer, counter=ctx._counter)
    else:
        ctx.end_round()
    return ctx


@settings(max_examples=80, deadline=None)
@given(steps=steps, active=st.integers(1, 8), slack=st.integers(-140, 250), seed=st.randoms(use_true_random=False))
def test_held_counts_and_the_plan_match_a_recount(steps: list[Step], active: int, slack: int, seed: Any) -> None:
    summarizer = Flaky()
    # The budget: the system segment and about what a few pages cost, so that plans archive some
    # pages, sometimes none, sometimes drop contents entries, sometimes cannot fit.
    empty = memci.ContextSystem("Be brief.")
    limit = empty.tool_tokens() + empty.token_count() + 150 + slack
    # The exact fit (not the cache-stable cut, whose low-water mark is a share of the budget, so
    # the two budgets below would not cut alike): its plans must agree step for step.
    options: dict[str, Any] = {"active_pages": active, "summarizer": summarizer, "cache_stable": False}
    systems = [
        memci.ContextSystem("Be brief.", storage=DictStorage(), max_context_tokens=limit, **options),
        memci.ContextSystem(
            "Be brief.", storage=DictStorage(), max_context_tokens=limit - PRIMING, counter=exact, **options
        ),
    ]
    for n, step in enumerate(steps):
        batch = [message(seed.randrange(6), n * 10 + j) for j in range(step[1])]
        outcomes: list[object] = []
        for i in range(2):
            try:
                systems[i] = run(systems[i], step, n, batch, summarizer)
                outcomes.append(None)
            except (memci.MemciError, RuntimeError) as error:
                outcomes.append(type(error).__name__)
            assert_held_counts_are_fresh(systems[i])
            try:  # every step is followed by a request: a plan under the budget
                outcomes.append(len(systems[i].build_messages()))
            except memci.ContextOverflowError:
                outcomes.append("overflow")
            assert_held_counts_are_fresh(systems[i])
        assert outcomes[:2] == outcomes[2:], (step, outcomes)
        assert observed(systems[0]) == observed(systems[1]), step
    assert systems[0].token_count() == systems[1].token_count() + PRIMING


@pytest.mark.parametrize("rule", ["drop_earlier", "count"])
def test_earlier_turns_thinking_is_left_out_of_the_held_counts_as_a_recount_leaves_it(rule: str) -> None:
    ctx = memci.ContextSystem("Be brief.", active_pages=10, thinking=rule)
    for n in range(4):
        ctx.extend([user(f"q{n}"), thinking(n), calling(f"c{n}"), tool(f"c{n}")])
    ctx.add(tool_results(9))
    window = ctx._window
    held = window.tokens_without_oldest(ctx.encoding, rule)
    system = window.messages()[: window.system_len]
    pages = [window.page(i) for i in window.page_indices()]
    for k in range(len(pages) + 1):
        kept = system + [m for p in pages[k:] for m in p]
        assert held[k] == tokens.count_messages(kept, thinking=rule)
    everything = window.tokens_without_oldest(ctx.encoding, "count")
    assert (held[0] < everything[0]) == (rule == "drop_earlier")
