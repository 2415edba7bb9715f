"""The ``langmem-tiers`` command: demo, inspect, export/import, recall and evaluation."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from langmem_tiers.errors import ConfigError, InvalidMessageError, LangmemTiersError
from langmem_tiers.messages import Message, make_message

DEFAULT_PATH = "langmem-demo"
KEYRING_HELP = ("the key folder of an encrypted journal (TieredMemory.open(keyring=FOLDER); a memory opened "
                "with keyring=True keeps it in PATH/keys); an unencrypted memory opened with it seals new text")


def _memory(args: argparse.Namespace, *, vectors: bool = True, **extra: Any) -> Any:
    from langmem_tiers import TieredMemory

    _check_path(args.path)
    embedder: Any = False if not vectors or getattr(args, "no_vectors", False) else None
    keyring = check_keyring(args.keyring)
    if keyring is not None:
        extra.setdefault("keyring", keyring)
    return TieredMemory.open(args.path, session_id=args.session, user_id=args.user, agent_id=args.agent,
                             embedder=embedder, chroma=args.chroma, **extra)


def check_keyring(folder: str | None) -> Path | None:
    """``--keyring FOLDER``: the key folder of an encrypted journal; it must exist (a misspelled
    folder would otherwise become a new, empty keyring, and every sealed text unreadable)."""
    if folder is None:
        return None
    path = Path(folder)
    if not path.is_dir():
        raise ConfigError(f"--keyring ({folder}) is not a folder: pass the key folder the journal was written with "
                          "(TieredMemory.open(..., keyring=FOLDER)); to start an encrypted memory, create it first "
                          "(mkdir -m 700 FOLDER)")
    return path


def _check_path(path: str) -> None:
    if str(path).startswith(("postgresql://", "postgres://")):
        return
    if Path(path).exists() and not Path(path).is_dir():
        raise ConfigError(f"--path ({path}) is a file: pass the memory folder (the one holding "
                          "journal.sqlite3) or a postgresql:// URL")


def cmd_demo(args: argparse.Namespace) -> int:
    from langmem_tiers.cli.demo import run_demo

    _check_path(args.path)
    run_demo(path=args.path, sessions=args.sessions, turns_per_session=args.turns, no_vectors=args.no_vectors)
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.panel import Panel
    from rich.table import Table

    console = Console()
    with _memory(args) as memory:
        stats = memory.stats()
        table = Table(title=f"session {args.session!r}")
        table.add_column("what")
        table.add_column("value", justify="right")
        for key, value in vars(stats).items():
            table.add_row(key, str(value))
        console.print(table)
        console.print(Panel(memory.summary or "(empty)", title="rolling summary"))
        window = Table(title="window")
        window.add_column("id", justify="right")
        window.add_column("role")
        window.add_column("text")
        for m in memory.window()[-args.last:]:
            window.add_row(str(m.id), m.role, m.text[:100])
        console.print(window)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from langmem_tiers.cli.transfer import atomic_output, check_output, export_lines

    target = None if args.out == "-" else check_output(args.out)
    # No vectors: exporting reads the journal only, and must not need the Chroma folder's lock.
    with _memory(args, vectors=False) as memory:
        ns = memory.namespace
        lines = export_lines(memory.iter_messages(), ns.user_id, ns.agent_id, ns.session_id)
        if target is None:
            count = _write_lines(lines, sys.stdout, args)
        else:
            with atomic_output(target) as out:
                count = _write_lines(lines, out, args)
    print(f"exported {count} messages", file=sys.stderr)
    return 0


def _write_lines(lines: Iterable[str], out: IO[str], args: argparse.Namespace) -> int:
    count = 0
    for line in lines:
        out.write(line)
        count += 1
    if count == 0 and not args.allow_empty:
        # Usually a misspelled --session: refuse before an empty file replaces a backup.
        where = args.out if args.out != "-" else "stdout"
        raise ConfigError(f"session {args.session!r} (user {args.user!r}, agent {args.agent!r}) holds no "
                          f"messages: nothing written to {where}; check --session/--user/--agent, or pass "
                          "--allow-empty")
    return count


def cmd_import(args: argparse.Namespace) -> int:
    from langmem_tiers.cli.transfer import export_key, read_lines

    name = "stdin" if args.input == "-" else args.input
    if args.input == "-":
        lines = read_lines(sys.stdin.buffer, name)
    else:
        with open(args.input, "rb") as source:
            lines = read_lines(source, name)
    with _memory(args) as memory:
        ns = memory.namespace
        # Keys of what the session holds; a message stored without a key answers to the key its
        # export carries, so an export imported back into its own session adds nothing.
        held = {export_key(ns.user_id, ns.agent_id, ns.session_id, m) for m in memory.iter_messages()}
        fresh = [_message(number, data, name, memory.config.max_message_chars)
                 for number, data in lines if data["key"] not in held]
        before = memory.stats().messages
        if fresh:
            memory.add_messages(fresh)  # one transaction: every message of the file, or none
        memory.flush()
        added = memory.stats().messages - before
    print(f"imported {added} messages; {len(lines) - added} were already in the session", file=sys.stderr)
    return 0


def _message(number: int, data: dict[str, Any], name: str, max_chars: int) -> Message:
    try:
        return make_message(data.get("role"), data.get("content"), name=data.get("name"),
                            tool_calls=data.get("tool_calls") or (), tool_call_id=data.get("tool_call_id"),
                            metadata=data.get("metadata"), created_at=data.get("created_at"), key=data.get("key"),
                            max_chars=max_chars)
    except InvalidMessageError as e:
        raise InvalidMessageError(f"line {number} of {name}: {e}") from e
    except (TypeError, AttributeError) as e:  # e.g. tool_calls that are not a list of objects
        raise InvalidMessageError(f"line {number} of {name}: malformed message ({e})") from e


def cmd_search(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    with _memory(args) as memory:
        hits = memory.search(args.query, k=args.k, scope=args.scope, kinds=args.kind or None)
    table = Table(title=f"recall for {args.query!r}")
    for column in ("record", "kind", "score", "keyword", "vector", "text"):
        table.add_column(column)
    for h in hits:
        table.add_row(str(h.record_id), h.kind, f"{h.score:.4f}", _rank(h.parts.get("keyword_rank")),
                      _rank(h.parts.get("vector_rank")), h.text[:120])
    Console().print(table)
    return 0


def _rank(value: float | None) -> str:
    return "-" if value is None or value != value else str(int(value))


def cmd_remember(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        rid = memory.remember(args.text, args.kind, importance=args.importance, pinned=args.pinned,
                              tags=args.tag or ())
        memory.flush()
    print(rid)
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    target: int | str = args.scope or _record_id(args.record)
    with _memory(args) as memory:
        print(f"removed {memory.forget(target)} records")
    return 0


def _record_id(text: str) -> int:
    value = text.strip()
    if not value.isdecimal() or not value.isascii() or int(value) < 1:
        raise ConfigError(f"--record ({text!r}) must be a record id, a positive integer as printed by "
                          "`remember` or listed by `search`")
    return int(value)


def cmd_reindex(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        print(f"reindexed {memory.reindex()} records")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    with _memory(args) as memory:
        print(json.dumps({**asdict(memory.stats()), "working": memory.working.items()}, indent=2, default=str))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from langmem_tiers.inspector.server import serve
    from langmem_tiers.inspector.settings import InspectorSettings

    _check_path(args.path)
    keyring = check_keyring(args.keyring)
    serve(InspectorSettings.resolve(args.path, token=args.token, host=args.host, port=args.port, chroma=args.chroma,
                                    read_only=args.read_only, user=args.user, vectors=not args.no_vectors,
                                    allow_hosts=tuple(args.allow_host or ()),
                                    keyring=None if keyring is None else str(keyring)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="langmem-tiers", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def session_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--path", default=DEFAULT_PATH, help="memory folder or postgresql:// URL")
        p.add_argument("--session", default="demo")
        p.add_argument("--user", default=None)
        p.add_argument("--agent", default=None)
        p.add_argument("--chroma", default=None, help="Chroma server URL, e.g. http://127.0.0.1:8000")
        p.add_argument("--no-vectors", action="store_true", help="keyword recall only (no embedding model)")
        p.add_argument("--keyring", default=None, metavar="FOLDER", help=KEYRING_HELP)

    p = sub.add_parser("demo", help="run the offline demo conversation through a small budget")
    p.add_argument("--path", default=DEFAULT_PATH)
    p.add_argument("--sessions", type=int, default=8)
    p.add_argument("--turns", type=int, default=40, help="turns per session")
    p.add_argument("--no-vectors", action="store_true")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("inspect", help="show a stored session")
    session_args(p)
    p.add_argument("--last", type=int, default=20)
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("export", help="write a session as JSONL")
    session_args(p)
    p.add_argument("--out", default="-", help="file to write (replaced only when the export succeeds), - for stdout")
    p.add_argument("--allow-empty", action="store_true", help="write a file even if the session has no messages")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", help="read a session from JSONL (all lines or none; a second import adds nothing)")
    session_args(p)
    p.add_argument("--in", dest="input", default="-", help="JSONL file, - for stdin")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("search", help="recall from evicted turns and memories")
    session_args(p)
    p.add_argument("query")
    p.add_argument("-k", type=int, default=5)
    p.add_argument("--scope", choices=("session", "user", "agent"), default="session")
    p.add_argument("--kind", action="append")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("remember", help="store an explicit memory")
    session_args(p)
    p.add_argument("text")
    p.add_argument("--kind", default="fact")
    p.add_argument("--importance", type=float, default=0.5)
    p.add_argument("--pinned", action="store_true")
    p.add_argument("--tag", action="append")
    p.set_defaults(func=cmd_remember)

    p = sub.add_parser("forget", help="erase a record, or a whole session/user")
    session_args(p)
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--record")
    group.add_argument("--scope", choices=("session", "user", "agent"))
    p.set_defaults(func=cmd_forget)

    p = sub.add_parser("reindex", help="rebuild the keyword index and vectors from the journal")
    session_args(p)
    p.set_defaults(func=cmd_reindex)

    p = sub.add_parser("stats", help="print a session's stats as JSON (with the recall mode: vectors or keywords "
                       "only, and why; index lag, and the working state "
                       "and metrics: metrics count this process only, so the inspector's and your app's are "
                       "the ones that fill up)")
    session_args(p)
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("serve", help="the memory inspector: a local web page and JSON API (needs [inspector])")
    p.add_argument("--path", default=DEFAULT_PATH, help="memory folder or postgresql:// URL")
    p.add_argument("--chroma", default=None, help="Chroma server URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--host", default="127.0.0.1", help="bind address; beyond loopback needs --token")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--token", default=None, help="access token (default: $LANGMEM_TIERS_INSPECTOR_TOKEN or a new one)")
    p.add_argument("--read-only", action="store_true", help="hide and refuse every change")
    p.add_argument("--user", default=None, help="restrict the whole server to this user's data")
    p.add_argument("--allow-host", action="append", help="another Host name browsers may use (repeatable)")
    p.add_argument("--no-vectors", action="store_true", help="keyword recall only (no embedding model)")
    p.add_argument("--keyring", default=None, metavar="FOLDER", help=KEYRING_HELP)
    p.set_defaults(func=cmd_serve)

    # Listed for --help; main() hands `eval ...` to the harness's own parser before this one runs.
    sub.add_parser("eval", help="evaluate recall and the delivered context on LoCoMo or LongMemEval "
                                "(langmem-tiers eval --help)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["eval"]:  # the evaluation harness parses its own options (python -m langmem_tiers.eval)
        from langmem_tiers.eval.__main__ import main as eval_main

        return eval_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except LangmemTiersError as e:
        return _fail(f"{type(e).__name__}: {e}")
    except OSError as e:  # a file that cannot be read or written: say which and why
        where = f" {e.filename!r}" if e.filename else ""
        return _fail(f"cannot use{where}: {e.strerror or e}")
    except KeyboardInterrupt:
        return _fail("interrupted", code=130)


def _fail(message: str, code: int = 2) -> int:
    print("langmem-tiers: " + " ".join(message.split()), file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
