"""The context system's settings, checked once when a system is made: the system prompt, the counts,
the storage. Each bad value is an :class:`~memci.InvalidMessageError` or
:class:`~memci.InvalidOperationError` naming it."""

from __future__ import annotations

from memci.context.page import Message
from memci.errors import InvalidMessageError, InvalidOperationError, repr_of
from memci.storage import Storage
from memci.storage.async_protocol import is_async_store

__all__ = ["checked_storage", "positive", "system_message"]


def system_message(prompt: str | Message | None) -> Message | None:
    """The system prompt as a message; None for no prompt (``None`` or ``""``)."""
    if prompt is None or (isinstance(prompt, str) and not prompt):
        return None
    if isinstance(prompt, str):
        return {"role": "system", "content": str.__str__(prompt)}
    if isinstance(prompt, dict):
        if prompt.get("role") not in ("system", "developer"):
            raise InvalidMessageError(
                f"system_prompt: role must be 'system' or 'developer', got {repr_of(prompt.get('role'))}",
                path="system_prompt.role",
            )
        return prompt
    raise InvalidMessageError(
        f"system_prompt must be a str or a system message dict, got {type(prompt).__name__}", path="system_prompt"
    )


def positive(name: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidOperationError(f"ContextSystem: {name} must be an int >= {minimum}, got {repr_of(value)}")
    return value


def checked_storage(storage: object) -> Storage:
    """``storage`` if it is a sync :class:`~memci.Storage`, else a named error."""
    if is_async_store(storage):
        raise InvalidOperationError(
            f"ContextSystem: storage {type(storage).__name__} is async (its methods are coroutines): "
            "use memci.AsyncContextSystem"
        )
    if not isinstance(storage, Storage):
        raise InvalidOperationError(
            "ContextSystem: storage must be a memci.Storage (put_page, get_page, page_indices, save_state, "
            f"load_state, close), got {type(storage).__name__}"
        )
    return storage
