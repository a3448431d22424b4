"""The 4 GiB limit on one message (docs/errors.md, "The size limit"), at its real size.

The limit is checked before anything reads a message, so a length that would wrap is never used;
the cargo tests exercise it with the limit lowered and on a lazily mapped 4 GiB buffer. This test
builds a real message of just over 4 GiB encoded (from one 1 MiB string repeated, so Python holds
1 MiB, and the core about 4.3 GB while it encodes) and is run only when asked:
``MEMCI_TEST_4GIB=1 pytest tests/test_size_limit.py``. It needs about 5 GB of free memory."""

from __future__ import annotations

import os
import re

import pytest
from memci import InvalidMessageError, MessageArray, tokens

pytestmark = pytest.mark.skipif(
    os.environ.get("MEMCI_TEST_4GIB") != "1", reason="builds a 4 GiB message: set MEMCI_TEST_4GIB=1 to run it"
)

CHUNK = "x" * (1 << 20)
#: 4097 strings of 1 MiB (each 5 bytes more encoded): just over 4 GiB - 1.
OVER = {"role": "user", "content": [CHUNK] * 4097}
LIMIT = re.escape("over the limit of 4294967295 bytes (4 GiB - 1) on one message")


def test_a_message_over_4_gib_is_refused_and_nothing_is_stored() -> None:
    arr = MessageArray([{"role": "user", "content": "small"}])
    before = arr.to_json()
    with pytest.raises(InvalidMessageError, match=f"^message: is 429[0-9]{{7}} bytes once encoded, {LIMIT}$"):
        arr.append(OVER)
    assert arr.to_json() == before


def test_a_message_over_4_gib_is_refused_when_counted() -> None:
    with pytest.raises(InvalidMessageError, match=LIMIT):
        tokens.count_message(OVER)
