"""Server settings and the safety rules decided before anything listens (bind address, token)."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import secrets
import socket
from dataclasses import dataclass, field
from pathlib import Path

from langmem_tiers.errors import ConfigError

TOKEN_ENV = "LANGMEM_TIERS_INSPECTOR_TOKEN"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARDS = frozenset({"0.0.0.0", "::", ""})
MIN_TOKEN_CHARS = 16


@dataclass(frozen=True)
class InspectorSettings:
    """What ``langmem-tiers serve`` was asked for, validated by :meth:`resolve`.

    ``token`` is always set after :meth:`resolve` (generated when neither ``--token`` nor
    the environment gives one). ``user`` restricts the whole server to one user's data.
    ``keyring`` is the key folder of an encrypted journal (``--keyring``), passed to
    ``TieredMemory.open(keyring=...)``.
    """

    path: str
    chroma: str | None = None
    host: str = "127.0.0.1"
    port: int = 8765
    token: str = ""
    token_given: bool = False
    read_only: bool = False
    user: str | None = None
    vectors: bool = True
    allow_hosts: tuple[str, ...] = ()
    page_size: int = 100
    extra_hosts: frozenset[str] = field(default_factory=frozenset)
    keyring: str | None = None

    @classmethod
    def resolve(cls, path: str, *, token: str | None = None, host: str = "127.0.0.1", port: int = 8765,
                **options: object) -> InspectorSettings:
        """Apply the safety rules: a non-loopback bind needs an explicit token; a token is always set."""
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise ConfigError(f"--port ({port!r}) must be an integer between 0 and 65535")
        given = token if token is not None else os.environ.get(TOKEN_ENV) or None
        if given is not None and len(given) < MIN_TOKEN_CHARS:
            raise ConfigError(f"the access token has {len(given)} characters; use at least {MIN_TOKEN_CHARS} "
                              "(or leave --token out and one is generated)")
        if not is_loopback(host) and given is None:
            raise ConfigError(f"--host {host} listens beyond this machine: pass an explicit --token (or set "
                              f"{TOKEN_ENV}) so that nobody on the network can reach the memory with a guessed "
                              "one, or keep the default --host 127.0.0.1")
        if not path.startswith(("postgresql://", "postgres://")) and not (Path(path) / "journal.sqlite3").exists():
            raise ConfigError(f"--path ({path}) holds no memory (no journal.sqlite3): pass the folder your "
                              "application opens, e.g. the one `langmem-tiers demo` made, or a postgresql:// URL")
        user = options.pop("user", None)
        if user is not None and (not isinstance(user, str) or not user):
            raise ConfigError(f"--user ({user!r}) must be a non-empty user id")
        keyring = options.get("keyring")
        if keyring is not None and not (isinstance(keyring, str) and Path(keyring).is_dir()):
            raise ConfigError(f"--keyring ({keyring!r}) is not a folder: pass the key folder the journal was "
                              "written with")
        return cls(path=path, host=host, port=port, token=given or secrets.token_urlsafe(24),
                   token_given=given is not None, user=user, extra_hosts=_host_names(host),
                   **options)  # type: ignore[arg-type]

    @property
    def csrf_token(self) -> str:
        """The per-server secret every form and cookie-authenticated API call must echo back."""
        return hmac.new(self.token.encode(), b"langmem-tiers inspector csrf", hashlib.sha256).hexdigest()[:32]

    @property
    def cookie_name(self) -> str:
        # Cookies ignore ports: two servers on one host must not overwrite each other's cookie.
        return f"langmem_tiers_inspector_{self.port}"

    def url(self, with_token: bool = True) -> str:
        host = "127.0.0.1" if self.host in WILDCARDS else self.host
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.port}/" + (f"?token={self.token}" if with_token else "")

    def host_allowed(self, header: str) -> bool:
        """The Host header names this server (not an attacker's domain resolving to us: DNS rebinding)."""
        name = host_name(header)
        return name in LOOPBACK_NAMES or name in self.extra_hosts or name in {h.lower() for h in self.allow_hosts}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """``example.com:8765`` -> ``example.com``; ``[::1]:8765`` -> ``::1``; lower case."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value


def _host_names(host: str) -> frozenset[str]:
    """Names a browser may use to reach a non-loopback bind: the bound address, or for a wildcard
    bind this machine's host names (others must be listed with ``--allow-host``)."""
    if host in WILDCARDS:
        names = {socket.gethostname().lower(), socket.getfqdn().lower()}
        return frozenset(n for n in names if n)
    return frozenset({host.lower()})
