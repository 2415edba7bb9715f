"""Safe export and import of a session as JSON lines, for the ``langmem-tiers`` command.

* **Export never destroys a backup.** Lines go to a temporary file in the target's
  folder, which replaces the target only when every line is written and synced; a
  failure (or a session with no messages: usually a misspelled ``--session``) leaves
  the target as it was.
* **Import is atomic and idempotent.** Every line is read and checked first, then all
  messages are appended in one ``add_messages`` call (one journal transaction: all or
  none). Each message carries an idempotency key, so importing a file twice stores it
  once: the line's ``key``, else a key derived from the line's content and its
  occurrence in the file. Export writes every message's key (a stored one, else one
  derived from the session and the message id), so re-importing an export into the
  session it came from adds nothing.
* **Bad input is one clear line**, naming the line number and what to fix.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO

from langmem_tiers.errors import ConfigError, InvalidMessageError
from langmem_tiers.messages import Message

# Messages nest a few levels (content parts, tool calls, metadata); anything deeper is
# not a message and could exhaust the stack further down.
MAX_DEPTH = 32
EXAMPLE_LINE = '{"role": "user", "content": "hi"}'


# -- keys --------------------------------------------------------------------------

def _digest(*parts: object) -> str:
    text = "\x1f".join(str(p) for p in parts)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def export_key(user_id: str, agent_id: str, session_id: str, message: Message) -> str:
    """The key export writes for a message stored without one: stable for this stored message."""
    if message.key is not None:
        return message.key
    return "export:" + _digest(user_id, agent_id, session_id, message.id, message.created_at)


def canonical(data: dict[str, Any]) -> str:
    """One spelling of a parsed line, whatever its key order and spacing."""
    return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def line_key(data: dict[str, Any], occurrence: int) -> str:
    """The key of an imported line without one: its content, and which copy of that content it is."""
    return f"import:{_digest(canonical(data))}:{occurrence}"


# -- export ------------------------------------------------------------------------

def check_output(target: str) -> Path:
    """Refuse an ``--out`` that is a folder or lives in a missing folder, before anything is read."""
    path = Path(target)
    if path.is_dir():
        raise ConfigError(f"--out ({target}) is a folder: name a file, e.g. {path / 'session.jsonl'}")
    parent = path.parent
    if not parent.is_dir():
        raise ConfigError(f"--out ({target}): the folder {str(parent)!r} does not exist; create it first")
    return path


@contextlib.contextmanager
def atomic_output(target: Path) -> Iterator[IO[str]]:
    """A text file that replaces ``target`` only if the block completes.

    The temporary file sits in the target's folder (a rename within one filesystem is
    atomic) and is removed on any failure. An existing target keeps its permissions;
    a new one is private (0600): it holds conversation data.
    """
    mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o600
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def export_lines(messages: Iterable[Message], user_id: str, agent_id: str, session_id: str) -> Iterator[str]:
    """One JSON line per message, each with its idempotency key."""
    for m in messages:
        data = m.to_dict()
        data["key"] = export_key(user_id, agent_id, session_id, m)
        yield json.dumps(data, ensure_ascii=False) + "\n"


# -- import ------------------------------------------------------------------------

def read_lines(source: BinaryIO, name: str) -> list[tuple[int, dict[str, Any]]]:
    """Parse every non-blank line of ``source`` into ``(line number, message dict)``, each with a key.

    Raises:
        InvalidMessageError: a line is not UTF-8, not JSON, not an object, nested too
            deeply, or repeats a key; the message names the line.
    """
    out: list[tuple[int, dict[str, Any]]] = []
    seen: dict[str, int] = {}
    copies: dict[str, int] = {}
    for number, raw in enumerate(source, 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidMessageError(
                f"line {number} of {name} is not UTF-8 (byte 0x{raw[e.start]:02x} at byte {e.start + 1}): "
                "convert the file to UTF-8"
            ) from e
        if number == 1:
            line = line.removeprefix("\ufeff")
        if not line.strip():
            continue
        data = _parse(line, number, name)
        data.pop("id", None)  # ids are assigned by the destination journal
        key = data.get("key")
        if key is None:
            spelling = canonical(data)
            copies[spelling] = copies.get(spelling, 0) + 1
            key = data["key"] = line_key(data, copies[spelling])
        if not isinstance(key, str):
            raise InvalidMessageError(f"line {number} of {name}: key must be a string, got {key!r:.80}")
        if key in seen:
            raise InvalidMessageError(
                f"line {number} of {name} repeats the key {key!r:.80} of line {seen[key]}: "
                "give every message its own key"
            )
        seen[key] = number
        out.append((number, data))
    return out


def _parse(line: str, number: int, name: str) -> dict[str, Any]:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as e:
        raise InvalidMessageError(f"line {number} of {name} is not JSON ({e.msg} at column {e.colno})") from e
    except RecursionError as e:
        raise InvalidMessageError(
            f"line {number} of {name} nests deeper than {MAX_DEPTH} levels: a message is one flat object"
        ) from e
    if not isinstance(data, dict):
        kind = "null" if data is None else {list: "a list", str: "a string", bool: "a boolean"}.get(
            type(data), "a number")
        raise InvalidMessageError(
            f"line {number} of {name} is {kind}, not a message object: write one object per line, "
            f"e.g. {EXAMPLE_LINE}"
        )
    if _depth(data) > MAX_DEPTH:
        raise InvalidMessageError(
            f"line {number} of {name} nests deeper than {MAX_DEPTH} levels: a message is one flat object"
        )
    return data


def _depth(value: Any) -> int:
    """Nesting depth of parsed JSON, without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            break
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest
