"""A hypothesis state machine: random rounds, messages, recalls, saves, loads and crashes (a system
dropped without saving, then loaded) against the pure-Python reference (``context_reference.py``),
under random policies."""

from __future__ import annotations

import copy

import memci
from context_helpers import DictStorage, FixedSummarizer, pages_counter
from context_reference import ReferenceContext
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

TEXT = st.text(alphabet="abc 中文。.", max_size=12)


class ContextMachine(RuleBasedStateMachine):
    ctx: memci.ContextSystem
    ref: ReferenceContext

    @initialize(
        shape=st.tuples(st.integers(1, 4), st.integers(1, 6), st.integers(1, 9), st.integers(10, 120)),
        trigger=st.sampled_from([0.5, 0.9, 1.0]),
        floor_share=st.sampled_from([0.3, 0.8, 1.0]),
    )
    def start(self, shape: tuple[int, int, int, int], trigger: float, floor_share: float) -> None:
        """n active pages, m and p rounds, and the contents cap; the LRU trigger and floor."""
        n, m, p, cap = shape
        floor = trigger * floor_share
        self.storage = DictStorage()
        self.ctx = memci.ContextSystem(
            "sys",
            active_pages=n,
            storage=self.storage,
            counter=pages_counter,
            summarizer=FixedSummarizer(),
            policy=memci.ArchivePolicy(m, p, cap, trigger, floor),
        )
        self.ref = ReferenceContext(n, m, p, cap, trigger, floor)
        self.saved: ReferenceContext | None = None  # the reference as of the last save

    @rule(text=TEXT)
    def user_message(self, text: str) -> None:
        message = {"role": "user", "content": text}
        assert self.ctx.add(message) == self.ref.add(message)

    @rule(text=TEXT, role=st.sampled_from(["assistant", "tool"]))
    def reply(self, text: str, role: str) -> None:
        message = {"role": role, "content": text}
        if role == "tool":
            message["tool_call_id"] = "c"
        assert self.ctx.add(message) == self.ref.add(message)

    @rule()
    def end_round(self) -> None:
        result = self.ctx.end_round()
        assert [(d.index, d.rule) for d in result.dropped] == self.ref.end_round()
        assert result.round == self.ref.round

    @rule(data=st.data())
    def recall(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(-1, self.ref.next_index + 1))
        expected = self.ref.recall(index)
        if expected is None:
            try:
                self.ctx.recall(index)
            except memci.PageError:
                return
            raise AssertionError(f"recall({index}) should fail")
        assert self.ctx.recall(index).messages() == expected

    @precondition(lambda self: self.ref.next_index > 1)
    @rule(data=st.data())
    def recall_through_a_tool_call(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(1, self.ref.next_index - 1))
        is_active = any(i == index for i, _ in self.ref.active)
        self.ref.recall(index)
        call = {
            "id": "r",
            "type": "function",
            "function": {"name": "recall_page", "arguments": f'{{"page_index": {index}}}'},
        }
        result = self.ctx.handle_tool_call(call)
        assert result["role"] == "tool"
        assert ('"in_window": true' in result["content"]) == is_active

    @rule()
    def save_and_load(self) -> None:
        self.ctx.save()
        self.saved = copy.deepcopy(self.ref)
        self.ctx = memci.ContextSystem.load(self.storage, counter=pages_counter, summarizer=FixedSummarizer())

    @precondition(lambda self: self.saved is not None)
    @rule()
    def crash_and_load(self) -> None:
        """The process dies: whatever happened since the last save is gone, nothing before it."""
        assert self.saved is not None
        self.ref = copy.deepcopy(self.saved)
        self.ctx = memci.ContextSystem.load(self.storage, counter=pages_counter, summarizer=FixedSummarizer())

    @invariant()
    def same_pages_and_contents(self) -> None:
        ctx, ref = self.ctx, self.ref
        assert [p.index for p in ctx.pages] == [i for i, _ in ref.active]
        assert ctx.build_messages(sanitize=False)[2 + bool(ref.entries) :] == ref.window()
        assert [(e.index, e.recall_count, e.last_recall_round, e.archived_round) for e in ctx.contents] == [
            (i, c.recall_count, c.last_recall_round, c.archived_round) for i, c in sorted(ref.entries.items())
        ]
        assert [(d.index, d.recall_count, d.dropped_round, d.rule) for d in ctx.dropped] == [
            (i, c.recall_count, r, rule) for i, (c, r, rule) in sorted(ref.dropped.items())
        ]
        assert ctx.contents_tokens() == 10 * len(ref.entries)
        assert self.storage.page_indices() == sorted(self.saved.stored if self.saved else ())
        assert ctx.round == ref.round


TestContextMachine = ContextMachine.TestCase
