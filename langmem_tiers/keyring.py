"""Per-user keys for encrypted journals, kept outside the database.

With a keyring, the journal stores every user-content text sealed with AES-256-GCM under
a key of its user (a session without a user id gets a key of its own), and ``forget`` of
the user's last session destroys that key (crypto-shredding): every copy the engines could
not erase in place (PostgreSQL WAL and dead tuples, replicas, backups taken before) holds
ciphertext that nothing can open any more. That is why keys never live in the database.

A :class:`KeyRing` is three calls: get a subject's key (creating it on first write), say
whether it exists, destroy it. :class:`FolderKeyRing` keeps one small file per subject.
A KMS plugs in as a keyring whose ``key()`` unwraps a data key stored wrapped (envelope
encryption) and whose ``destroy()`` deletes the wrapped copy (or schedules deletion of a
per-user KMS key): see ``docs/core/erasure.md``.

Example:
    >>> import tempfile
    >>> ring = FolderKeyRing(tempfile.mkdtemp())
    >>> key = ring.key("user ada", create=True)
    >>> len(key), ring.key("user ada", create=False) == key
    (32, True)
    >>> ring.destroy("user ada"), ring.exists("user ada")
    (True, False)
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
import threading
from pathlib import Path
from typing import Protocol, runtime_checkable

from langmem_tiers.errors import ConfigError, EncryptionError

KEY_BYTES = 32  # AES-256
_MAGIC = b"lmtkey1\n"  # a key file: this header, then the raw key


@runtime_checkable
class KeyRing(Protocol):
    """Where the per-user keys of an encrypted journal live (never in the journal itself).

    ``subject`` is an opaque string the journal builds from its own id and the user id (or
    the session ids of an anonymous session). Implementations must be safe across threads
    and processes: two processes asking to create one subject's key at once must end up
    with the same key.
    """

    def key(self, subject: str, *, create: bool) -> bytes | None:
        """The subject's 32-byte key; a new one when missing and ``create``, else ``None``."""
        ...

    def exists(self, subject: str) -> bool:
        """Whether the subject has a key (``False`` after :meth:`destroy`)."""
        ...

    def destroy(self, subject: str) -> bool:
        """Destroy the subject's key for good; ``True`` when a key existed."""
        ...


class FolderKeyRing:
    """One key file per subject in a folder: ``<sha256 of the subject>.key``, mode 0600.

    File names are hashes, so the folder does not list user ids. A key is created with an
    exclusive link (two processes creating it at once keep the first one) and fsynced; it
    is destroyed by overwriting the file, fsyncing, unlinking and fsyncing the folder.
    Overwriting in place does not reach every copy on copy-on-write file systems, SSD
    remapped blocks or snapshots of the key folder: keep the folder off snapshots and
    backups of the data (that separation is what makes forget final).

    Keys are cached in memory, revalidated with one ``stat`` per use, so a key destroyed by
    another process is not used again here.

    Args:
        folder: the key folder (created 0700 when missing). A folder on the same disk as the
            data protects against copies of the database (backups, replicas, WAL archives),
            not against someone holding the whole disk.
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        if self.folder.exists() and not self.folder.is_dir():
            raise ConfigError(f"keyring folder {self.folder} is a file: give a folder (it is created when missing)")
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"cannot create keyring folder {self.folder}: {e}") from e
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[tuple[int, int], bytes]] = {}
        self._paths: dict[str, Path] = {}

    def __repr__(self) -> str:
        return f"FolderKeyRing({str(self.folder)!r})"

    def path(self, subject: str) -> Path:
        """The file that holds the subject's key."""
        found = self._paths.get(subject)
        if found is None:
            found = self.folder / (hashlib.sha256(subject.encode("utf-8", "surrogatepass")).hexdigest() + ".key")
            if len(self._paths) > 4096:
                self._paths.clear()
            self._paths[subject] = found
        return found

    def key(self, subject: str, *, create: bool) -> bytes | None:
        """The subject's 32-byte key; a new one when missing and ``create``, else ``None``."""
        path = self.path(subject)
        with self._lock:
            found = self._read(subject, path)
            if found is not None or not create:
                return found
            self._create(path)
            return self._read(subject, path)

    def exists(self, subject: str) -> bool:
        """Whether the subject has a key file (``False`` after :meth:`destroy`)."""
        return self.path(subject).exists()

    def destroy(self, subject: str) -> bool:
        """Overwrite, fsync and unlink the subject's key file; ``True`` when a key existed."""
        path = self.path(subject)
        with self._lock:
            self._cache.pop(subject, None)
            try:
                fd = os.open(path, os.O_WRONLY)
            except FileNotFoundError:
                return False
            except OSError as e:
                raise EncryptionError(f"cannot destroy key file {path}: {e}") from e
            try:
                size = os.fstat(fd).st_size
                os.write(fd, secrets.token_bytes(size))  # the key bytes leave the disk block we can reach
                os.fsync(fd)
            finally:
                os.close(fd)
            os.unlink(path)
            _fsync_folder(self.folder)
            return True

    def _read(self, subject: str, path: Path) -> bytes | None:
        try:
            info = os.stat(path)
        except FileNotFoundError:
            self._cache.pop(subject, None)
            return None
        stamp = (info.st_ino, info.st_mtime_ns)
        cached = self._cache.get(subject)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise EncryptionError(f"key file {path} is readable by others (mode {stat.S_IMODE(info.st_mode):o}): "
                                  "chmod 600 it, and 700 its folder")
        try:
            data = path.read_bytes()
        except FileNotFoundError:  # destroyed between stat and read
            self._cache.pop(subject, None)
            return None
        if not data.startswith(_MAGIC) or len(data) != len(_MAGIC) + KEY_BYTES:
            raise EncryptionError(f"key file {path} is damaged ({len(data)} bytes): restore it from the key backup")
        key = data[len(_MAGIC):]
        self._cache[subject] = (stamp, key)
        return key

    def _create(self, path: Path) -> None:
        """Write a new key atomically: a private temporary file, fsynced, then linked into place.

        ``link`` fails when the name exists, so a key another process created meanwhile is kept
        (a rename would replace it, and the rows that process sealed would become unreadable).
        """
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            try:
                os.write(fd, _MAGIC + secrets.token_bytes(KEY_BYTES))
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass
            _fsync_folder(self.folder)
        except OSError as e:
            raise EncryptionError(f"cannot write key file {path}: {e}") from e
        finally:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
