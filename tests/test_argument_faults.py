"""One fault, one wording: every public method that takes a role, an encoding or a strategy refuses
a bad one with the same words, prefixed by where it was given (``"recent: role"``), and changes
nothing (docs/message-array.md, "Errors")."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from typing import Any

import pytest
from factories import numbered, user
from memci import ContextSystem, InvalidOperationError, MessageArray, ops, tokens

ROLE_FAULT = "unknown role 'bogus'; expected one of system, developer, user, assistant, tool"
ENCODING_FAULT = (
    'unknown encoding "nope": expected o200k_base, cl100k_base, approximate or an OpenAI model name such as gpt-4o'
)

Call = Callable[[MessageArray], Any]

#: (place, a call giving it the role "bogus"), one per public way of naming a role.
ROLE_PLACES: list[tuple[str, Call]] = [
    ("by_role: role", lambda a: a.by_role("bogus")),
    ("count: role", lambda a: a.count("bogus")),
    ("indices: role", lambda a: a.indices("bogus")),
    ("role_range: role", lambda a: a.role_range("bogus", 0, 1)),
    ("recent: role", lambda a: a.recent(1, role="bogus")),
    ("recent: roles[1]", lambda a: a.recent(1, roles=["user", "bogus"])),
    ("between: role", lambda a: a.between(None, None, role="bogus")),
    ("marked: role", lambda a: a.marked("tag", role="bogus")),
    ("truncate: role", lambda a: a.truncate(role="bogus")),
    ("truncate: role", lambda a: a.execute({"operation": "TRUNCATE", "role": "bogus"})),
    ("filter: roles[0]", lambda a: a.filter(roles="bogus")),
    ("filter: roles[1]", lambda a: a.filter(roles=["user", "bogus"])),
    ("filter: roles[0]", lambda a: a.execute(ops.Filter(roles=("bogus",)))),
    ("trim_to_tokens: start_on[0]", lambda a: a.trim_to_tokens(5, start_on="bogus")),
    ("trim_to_tokens: end_on[1]", lambda a: a.trim_to_tokens(5, end_on=["human", "bogus"])),
    (
        "trim_to_tokens: start_on[0]",
        lambda a: a.execute({"operation": "trim_to_tokens", "maxTokens": 5, "startOn": "bogus"}),
    ),
]


def _same_everywhere(place: str, fault: str) -> str:
    return f"^{re.escape(f'{place}: {fault}')}$"


@pytest.mark.parametrize(("place", "call"), ROLE_PLACES)
def test_an_unknown_role_is_worded_the_same_everywhere(place: str, call: Call) -> None:
    arr = MessageArray(numbered(4))
    before = arr.to_json()
    with pytest.raises(InvalidOperationError, match=_same_everywhere(place, ROLE_FAULT)):
        call(arr)
    assert arr.to_json() == before


#: A role that is not a str, for the places that take one role.
NOT_A_STR_PLACES: list[tuple[str, Call]] = [
    ("by_role: role", lambda a: a.by_role(5)),  # type: ignore[arg-type]
    ("count: role", lambda a: a.count(5)),  # type: ignore[arg-type]
    ("recent: role", lambda a: a.recent(1, role=5)),  # type: ignore[arg-type]
    ("marked: role", lambda a: a.marked("tag", role=5)),  # type: ignore[arg-type]
    ("truncate: role", lambda a: a.truncate(role=5)),  # type: ignore[arg-type]
    ("filter: roles[0]", lambda a: a.filter(roles=[5])),  # type: ignore[list-item]
    ("trim_to_tokens: start_on[0]", lambda a: a.trim_to_tokens(5, start_on=[5])),  # type: ignore[list-item]
]


@pytest.mark.parametrize(("place", "call"), NOT_A_STR_PLACES)
def test_a_role_that_is_not_a_str_is_worded_the_same_everywhere(place: str, call: Call) -> None:
    with pytest.raises(InvalidOperationError, match=f"^{re.escape(place)} must be a str, got 5$"):
        call(MessageArray(numbered(2)))


#: (place, a call giving it the encoding "nope" or 5).
ENCODING_PLACES: list[tuple[str, Callable[[Any], Any]]] = [
    ("token_count: encoding", lambda e: MessageArray(numbered(2)).token_count(e)),
    ("trim_to_tokens: encoding", lambda e: MessageArray(numbered(2)).trim_to_tokens(5, encoding=e)),
    (
        "trim_to_tokens: encoding",
        lambda e: MessageArray(numbered(2)).execute({"operation": "trim_to_tokens", "maxTokens": 5, "encoding": e}),
    ),
    ("count: encoding", lambda e: tokens.count("x", e)),
    ("count_batch: encoding", lambda e: tokens.count_batch(["x"], e)),
    ("count_message: encoding", lambda e: tokens.count_message(user("x"), e)),
    ("count_messages: encoding", lambda e: tokens.count_messages([user("x")], e)),
    ("encoding_for_model: encoding", tokens.encoding_for_model),
    ("reply_priming: encoding", tokens.reply_priming),
    ("ranks_file: encoding", tokens.ranks_file),
    ("ContextSystem: encoding", lambda e: ContextSystem("You are terse.", encoding=e)),
]


@pytest.mark.parametrize(("place", "call"), ENCODING_PLACES)
def test_an_unknown_encoding_is_worded_the_same_everywhere(place: str, call: Callable[[Any], Any]) -> None:
    with pytest.raises(InvalidOperationError, match=_same_everywhere(place, ENCODING_FAULT)):
        call("nope")
    with pytest.raises(InvalidOperationError, match=f"^{re.escape(place)} must be a str, got 5$"):
        call(5)


@pytest.mark.parametrize(
    "call",
    [
        lambda a, s: a.trim_to_tokens(5, strategy=s),
        lambda a, s: a.execute(ops.TrimToTokens(5, strategy=s)),
        lambda a, s: a.execute({"operation": "trim_to_tokens", "maxTokens": 5, "strategy": s}),
    ],
    ids=["method", "config", "dict"],
)
def test_a_bad_strategy_is_worded_the_same_everywhere(call: Callable[[MessageArray, Any], Any]) -> None:
    arr = MessageArray(numbered(4))
    for bad, shown in (("middle", "'middle'"), (None, "None"), ("Last", "'Last'")):
        with pytest.raises(
            InvalidOperationError, match=f"^trim_to_tokens: strategy must be 'first' or 'last', got {shown}$"
        ):
            call(arr, bad)
    assert arr.batch_index == 0


def test_langchain_message_types_name_roles_where_a_trim_starts_and_ends() -> None:
    by_alias, by_role = MessageArray(numbered(6)), MessageArray(numbered(6))
    by_alias.trim_to_tokens(30, start_on="human", end_on=["ai", "human"])
    by_role.trim_to_tokens(30, start_on="user", end_on=["assistant", "user"])
    assert by_alias.messages() == by_role.messages()
    with pytest.raises(
        InvalidOperationError,
        match=_same_everywhere(
            "by_role: role", "unknown role 'human'; expected one of system, developer, user, assistant, tool"
        ),
    ):
        by_alias.by_role("human")


class Named(enum.StrEnum):
    USER = "user"
    BOGUS = "bogus"


#: A StrEnum member is its value, in a query (Rust reads it) and in a config (memci.ops reads it).
STR_ENUM_PLACES: list[tuple[str, Call]] = [
    ("by_role: role", lambda a: a.by_role(Named.BOGUS)),
    ("count: role", lambda a: a.count(Named.BOGUS)),
    ("recent: role", lambda a: a.recent(1, role=Named.BOGUS)),
    ("truncate: role", lambda a: a.truncate(role=Named.BOGUS)),
    ("filter: roles[0]", lambda a: a.filter(roles=[Named.BOGUS])),
    ("trim_to_tokens: start_on[0]", lambda a: a.trim_to_tokens(5, start_on=[Named.BOGUS])),
]


@pytest.mark.parametrize(("place", "call"), STR_ENUM_PLACES)
def test_a_str_enum_role_is_read_and_shown_as_its_value(place: str, call: Call) -> None:
    arr = MessageArray(numbered(2))
    assert arr.by_role(Named.USER) == numbered(2)
    assert arr.recent(5, roles=[Named.USER]) == numbered(2)
    with pytest.raises(InvalidOperationError, match=_same_everywhere(place, ROLE_FAULT)):
        call(arr)
