"""Field-level encryption of the journal's user content, and a blind keyword index (no I/O).

A :class:`FieldCipher` seals each stored text with AES-256-GCM under the key of its
*subject* (the user; a session without a user id is its own subject), with a random 96-bit
nonce per value and the field name and subject as associated data: a ciphertext moved to
another row kind, user or journal fails authentication. A stored value reads::

    "\\x1elmt1:" + base64url(key id (4 bytes) + nonce (12) + ciphertext + tag (16))

The prefix starts with a control character that JSON never writes unescaped and that typed
text does not start with, so rows stored before encryption was turned on (plaintext) still
read. Sealed fields: message content, name, tool-call arguments and metadata; record text,
tags and metadata; the rolling summary (extracted memories are records). Ids (user,
session, agent, message keys, memory keys), roles, token counts, timestamps and error texts
stay plaintext: the journal needs them for lookups.

The keyword index cannot hold plaintext, so encrypted records are indexed by *blind
tokens*: a keyed HMAC of each normalized word (lowercased, accents dropped, a light English
plural stemmer, stopwords left out), under a key derived from the subject's key, so one
word of two users gives two tokens. Queries are transformed the same way; bm25 (FTS5 and PostgreSQL alike)
rank the tokens. What the index still reveals: how many content words a record has, how
often a token repeats and which records share a token (equality, not the word).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import secrets
import threading
import time
import unicodedata
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from langmem_tiers.errors import DecryptionError, KeyUnavailableError, MissingDependencyError, SessionErasedError
from langmem_tiers.journal.base import MAX_QUERY_TERMS, Namespace, erased_message
from langmem_tiers.keyring import KEY_BYTES, KeyRing
from langmem_tiers.text import STOPWORDS, WORD

log = logging.getLogger(__name__)

PREFIX = "\x1elmt1:"
ALGORITHM = "aes-256-gcm/v1"  # what the journal's meta table records once encryption is on
META_KEY = "encryption"
_NONCE = 12
_KID = 4
MAX_BLIND_QUERY_TOKENS = 4 * MAX_QUERY_TERMS  # tokens of one query, over all its subjects
_TOKEN_BYTES = 10  # 80-bit blind tokens: 16 base32 characters, collisions negligible
# A key found for a read is trusted this long without asking the keyring again (a context() opens
# hundreds of fields). Writes always ask, so nothing is sealed with a key destroyed meanwhile.
READ_KEY_TTL_S = 0.5
# JSON values sealed only when they hold something: an empty list or object says nothing that the
# ciphertext's length would not say anyway, and skipping it saves two AES calls per record.
_EMPTY_JSON = frozenset({"[]", "{}"})

# Field names, bound into each ciphertext: a value sealed for one field never opens as another.
CONTENT, NAME, TOOL_ARGUMENTS, MESSAGE_METADATA = "messages.content", "messages.name", "tool_calls.arguments", \
    "messages.metadata"
RECORD_TEXT, RECORD_TAGS, RECORD_METADATA, RECORD_KEY, SUMMARY = "records.text", "records.tags", \
    "records.metadata", "records.key", "state.summary"


def is_sealed(value: object) -> bool:
    """True for a stored value written by :meth:`FieldCipher.seal`."""
    return isinstance(value, str) and value.startswith(PREFIX)


def _aesgcm() -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as e:
        raise MissingDependencyError(
            "an encrypted journal needs the cryptography package: pip install 'langmem-tiers[encryption]'"
        ) from e
    return AESGCM


def normalize_word(word: str) -> str:
    """A word as the blind index keys it: lowercase, accents dropped, a light plural stemmer.

    The stemmer (Harman's S-stemmer) folds plurals only ("buckets" -> "bucket", "cities" ->
    "city"); FTS5's porter and PostgreSQL's english stemmer also fold verb forms, which the
    blind index does not ("booking" and "booked" stay apart).

    Example:
        >>> [normalize_word(w) for w in ["Buckets", "cities", "José", "glass", "bus"]]
        ['bucket', 'city', 'jose', 'glass', 'bus']
    """
    word = "".join(c for c in unicodedata.normalize("NFKD", word.casefold()) if not unicodedata.combining(c))
    if len(word) > 3 and word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if len(word) > 2 and word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def index_words(text: str) -> list[str]:
    """The content words of a stored text, in order with repeats (ranking needs frequencies)."""
    return [w for w in (normalize_word(m) for m in WORD.findall(text)) if w and w not in STOPWORDS]


class FieldCipher:
    """Seals and opens journal fields with per-subject keys from a :class:`KeyRing`.

    Args:
        keyring: where the keys live (outside the database).
        journal_uid: the journal's own id (``meta.uid``), part of every subject: two journals
            sharing a keyring never share a key, and forgetting a user in one leaves the other.
    """

    def __init__(self, keyring: KeyRing, journal_uid: str) -> None:
        if not isinstance(keyring, KeyRing):
            from langmem_tiers.errors import ConfigError

            raise ConfigError(f"keyring must implement KeyRing (key, exists, destroy); got {keyring!r:.80}")
        self.keyring = keyring
        self.journal_uid = journal_uid
        self._aead_class = _aesgcm()
        self._lock = threading.Lock()
        # key bytes -> (AESGCM, key id, blind-index key): derived once per key
        self._derived: dict[bytes, tuple[Any, bytes, bytes]] = {}
        self._subjects: dict[Namespace, str] = {}
        self._read_keys: dict[str, tuple[float, bytes]] = {}  # subject -> (when checked, key)

    def subject(self, ns: Namespace) -> str:
        """Whose key seals this namespace's text: its user, or the session itself when anonymous."""
        found = self._subjects.get(ns)
        if found is None:
            found = (json.dumps([self.journal_uid, "session", ns.agent_id, ns.session_id]) if ns.anonymous
                     else json.dumps([self.journal_uid, "user", ns.user_id]))
            if len(self._subjects) > 4096:
                self._subjects.clear()
            self._subjects[ns] = found
        return found

    # --- keys ---------------------------------------------------------------

    def _keys(self, subject: str, create: bool) -> tuple[Any, bytes, bytes] | None:
        now = time.monotonic()
        cached = None if create else self._read_keys.get(subject)
        if cached is not None and now - cached[0] < READ_KEY_TTL_S:
            key: bytes | None = cached[1]
        else:
            key = self.keyring.key(subject, create=create)
            if key is None:
                self._read_keys.pop(subject, None)
                return None
            if len(self._read_keys) > 4096:
                self._read_keys.clear()
            self._read_keys[subject] = (now, key)
        assert key is not None
        if len(key) != KEY_BYTES:
            raise KeyUnavailableError(f"the keyring returned a {len(key)}-byte key for {subject}: keys are 32 bytes")
        with self._lock:
            derived = self._derived.get(key)
            if derived is None:
                kid = hmac.digest(key, b"langmem-tiers key id", "sha256")[:_KID]
                blind = hmac.digest(key, b"langmem-tiers blind index", "sha256")
                derived = (self._aead_class(key), kid, blind)
                if len(self._derived) > 4096:
                    self._derived.clear()
                self._derived[key] = derived
            return derived

    def has_key(self, ns: Namespace) -> bool:
        return self.keyring.exists(self.subject(ns))

    def shred(self, ns: Namespace) -> bool:
        """Destroy the subject's key: every text sealed with it is unreadable from now on."""
        return self.destroy(self.subject(ns))

    def destroy(self, subject: str) -> bool:
        self._read_keys.pop(subject, None)
        return self.keyring.destroy(subject)

    # --- values -------------------------------------------------------------

    def seal(self, ns: Namespace, field: str, text: str) -> str:
        subject = self.subject(ns)
        keys = self._keys(subject, create=True)
        assert keys is not None
        aead, kid, _ = keys
        nonce = secrets.token_bytes(_NONCE)
        sealed = aead.encrypt(nonce, text.encode("utf-8", "surrogatepass"), _aad(field, subject))
        return PREFIX + base64.urlsafe_b64encode(kid + nonce + sealed).decode("ascii")

    def open(self, ns: Namespace, field: str, stored: str) -> str:
        """The plaintext of a stored value (a plaintext row, written before encryption, as is)."""
        if not stored.startswith(PREFIX):
            return stored
        subject = self.subject(ns)
        try:
            raw = base64.urlsafe_b64decode(stored[len(PREFIX):].encode("ascii"))
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise DecryptionError(f"a sealed {field} of {_who(ns)} is not valid base64: it was altered") from None
        if len(raw) < _KID + _NONCE + 16:
            raise DecryptionError(f"a sealed {field} of {_who(ns)} is truncated ({len(raw)} bytes): it was altered")
        keys = self._keys(subject, create=False)
        if keys is None:
            raise KeyUnavailableError(
                f"the key of {_who(ns)} is not in {self.keyring!r}: forget() destroyed it (the text is gone for "
                "good), or this journal was opened with another keyring: open it with the keyring it was written with"
            )
        aead, kid, _ = keys
        if raw[:_KID] != kid:
            raise DecryptionError(
                f"a sealed {field} of {_who(ns)} was sealed with another key than this user's current one: it was "
                "moved from another user or journal, or the user's key was destroyed and created anew"
            )
        from cryptography.exceptions import InvalidTag

        try:
            plain: bytes = aead.decrypt(raw[_KID:_KID + _NONCE], raw[_KID + _NONCE:], _aad(field, subject))
        except InvalidTag:
            raise DecryptionError(
                f"a sealed {field} of {_who(ns)} failed authentication: it was altered, or moved from another "
                "row kind or user"
            ) from None
        return plain.decode("utf-8", "surrogatepass")

    # --- blind keyword index ------------------------------------------------

    def index_terms(self, ns: Namespace, text: str) -> str:
        """The blind tokens the keyword index stores for an encrypted record (space-separated)."""
        keys = self._keys(self.subject(ns), create=True)
        assert keys is not None
        return " ".join(_token(keys[2], w) for w in index_words(text))

    def query_terms(self, namespaces: Iterable[Namespace], words: Sequence[str]) -> list[str]:
        """Blind tokens of query words for each distinct subject of ``namespaces`` that has a key."""
        normalized = list(dict.fromkeys(w for w in (normalize_word(x) for x in words) if w))[:MAX_QUERY_TERMS]
        tokens: list[str] = []
        subjects = list(dict.fromkeys(self.subject(ns) for ns in namespaces))
        for subject in subjects:
            if tokens and len(tokens) + len(normalized) > MAX_BLIND_QUERY_TOKENS:
                # Scopes are one user's (one subject); a query over many users' records would
                # otherwise grow past what PostgreSQL's query parser accepts.
                log.warning("a keyword query over %d key subjects was cut to %d tokens: search per user",
                            len(subjects), len(tokens))
                break
            keys = self._keys(subject, create=False)
            if keys is not None:
                tokens += [_token(keys[2], w) for w in normalized]
        return tokens


def _token(blind_key: bytes, word: str) -> str:
    digest = hmac.digest(blind_key, word.encode("utf-8", "surrogatepass"), "sha256")[:_TOKEN_BYTES]
    return base64.b32encode(digest).decode("ascii").lower()


def _aad(field: str, subject: str) -> bytes:
    return f"langmem-tiers/v1\x00{field}\x00{subject}".encode("utf-8", "surrogatepass")


def _who(ns: Namespace) -> str:
    return f"user {ns.user_id!r}" if ns.user_id else f"anonymous session {ns.session_id!r}"


# --- helpers shared by both backends (a missing cipher means "off": values pass through) ---

def seal(cipher: FieldCipher | None, ns: Namespace, field: str, text: str | None) -> str | None:
    if cipher is None or text is None:
        return text
    return cipher.seal(ns, field, text)


def unseal(cipher: FieldCipher | None, ns: Namespace, field: str, stored: str | None) -> str | None:
    if stored is None:
        return None
    if cipher is None:
        if stored.startswith(PREFIX):
            raise KeyUnavailableError(
                f"a {field} of {_who(ns)} is encrypted but the journal was opened without a keyring: "
                "open it with keyring= (the key folder it was written with)"
            )
        return stored
    return cipher.open(ns, field, stored)


def seal_tool_calls(cipher: FieldCipher | None, ns: Namespace, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls as stored: ids and names stay readable (the journal pairs calls with results), arguments sealed."""
    if cipher is None:
        return calls
    return [{**c, "arguments": cipher.seal(ns, TOOL_ARGUMENTS, str(c["arguments"]))} for c in calls]


def open_tool_calls(cipher: FieldCipher | None, ns: Namespace, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**c, "arguments": unseal(cipher, ns, TOOL_ARGUMENTS, c.get("arguments", "{}"))} for c in calls]


def subject_digest(subject: str) -> str:
    """A short, stable name for a subject in logs and reports (never the user id itself)."""
    return hashlib.sha256(subject.encode("utf-8", "surrogatepass")).hexdigest()[:12]


class RowCodec:
    """What both backends store for a message, record or summary, sealed when a cipher is on.

    ``namespaces`` resolves namespace ids to their ids (the key subject) at once, an erased one absent:
    record rows name their session by id only, and sealing or opening a field needs its key subject.
    """

    def __init__(self, cipher: FieldCipher | None,
                 namespaces: Callable[[Collection[int]], Mapping[int, Namespace]]) -> None:
        self.cipher = cipher
        self.namespaces = namespaces

    def namespace_of(self, ns_id: int) -> Namespace:
        """One namespace's ids.

        Raises:
            SessionErasedError: it was erased (its id is never reused).
        """
        ns = self.namespaces((ns_id,)).get(ns_id)
        if ns is None:
            raise SessionErasedError(erased_message(ns_id, None))
        return ns

    def message_columns(self, ns_id: int, content_json: str, name: str | None,
                        tool_calls: list[dict[str, Any]] | None,
                        metadata_json: str | None) -> tuple[str, str | None, list[dict[str, Any]] | None, str | None]:
        """Content (JSON), name, tool calls and metadata (JSON) as stored."""
        cipher = self.cipher
        if cipher is None:
            return content_json, name, tool_calls, metadata_json
        ns = self.namespace_of(ns_id)
        return (cipher.seal(ns, CONTENT, content_json), seal(cipher, ns, NAME, name),
                seal_tool_calls(cipher, ns, tool_calls) if tool_calls else tool_calls,
                seal(cipher, ns, MESSAGE_METADATA, metadata_json))

    def message_fields(self, ns_id: int, content: str, name: str | None, tool_calls: list[dict[str, Any]] | None,
                       metadata: str | None) -> tuple[str, str | None, list[dict[str, Any]] | None, str | None]:
        """The stored message columns opened (plaintext rows pass through)."""
        if self.cipher is None and not (is_sealed(content) or is_sealed(name) or is_sealed(metadata)
                                        or any(is_sealed(c.get("arguments")) for c in tool_calls or ())):
            return content, name, tool_calls, metadata
        ns = self.namespace_of(ns_id)
        opened = unseal(self.cipher, ns, CONTENT, content)
        assert opened is not None
        return (opened, unseal(self.cipher, ns, NAME, name),
                open_tool_calls(self.cipher, ns, tool_calls) if tool_calls else tool_calls,
                unseal(self.cipher, ns, MESSAGE_METADATA, metadata))

    def seal_summary(self, ns_id: int, summary: str) -> str:
        if self.cipher is None or not summary:
            return summary
        return self.cipher.seal(self.namespace_of(ns_id), SUMMARY, summary)

    def summary(self, ns_id: int, stored: str) -> str:
        if not stored or (self.cipher is None and not is_sealed(stored)):
            return stored
        opened = unseal(self.cipher, self.namespace_of(ns_id), SUMMARY, stored)
        assert opened is not None
        return opened

    def record_columns(self, ns_id: int, text: str, tags_json: str, metadata_json: str,
                       key: str | None) -> tuple[str, str, str, str | None, str | None]:
        """Text, tags (JSON), metadata (JSON) and memory key as stored, and the blind index terms
        (``None`` when off). Memory keys ("locker_code") are compared in Python, never in SQL, so
        they are sealed too: an extracted key often names what the user said."""
        cipher = self.cipher
        if cipher is None:
            return text, tags_json, metadata_json, key, None
        ns = self.namespace_of(ns_id)
        return (cipher.seal(ns, RECORD_TEXT, text), _seal_json(cipher, ns, RECORD_TAGS, tags_json),
                _seal_json(cipher, ns, RECORD_METADATA, metadata_json), seal(cipher, ns, RECORD_KEY, key),
                cipher.index_terms(ns, text))

    def record_fields(self, ns: Namespace, text: str, tags: str, metadata: str,
                      key: str | None) -> tuple[str, str, str, str | None]:
        # is_sealed() inlined: four calls cost a plaintext journal ~2 us a record read.
        if self.cipher is None and not (text.startswith(PREFIX) or tags.startswith(PREFIX)
                                        or metadata.startswith(PREFIX) or (key is not None and key.startswith(PREFIX))):
            return text, tags, metadata, key
        opened = (unseal(self.cipher, ns, RECORD_TEXT, text), unseal(self.cipher, ns, RECORD_TAGS, tags),
                  unseal(self.cipher, ns, RECORD_METADATA, metadata))
        assert None not in opened
        return (*opened, unseal(self.cipher, ns, RECORD_KEY, key))  # type: ignore[return-value]

    def sealed_column(self, ns_id: int, field: str, value: str) -> str:
        """One record column as stored (``update_record``)."""
        return value if self.cipher is None else _seal_json(self.cipher, self.namespace_of(ns_id), field, value)

    def index_terms(self, ns_id: int, text: str) -> str | None:
        """What the keyword index stores for a record's text: ``None`` (the text itself) when off."""
        return None if self.cipher is None else self.cipher.index_terms(self.namespace_of(ns_id), text)


def shred_orphans(cipher: FieldCipher | None, erased: Iterable[Namespace],
                  still_used: Callable[[Namespace], bool]) -> list[Namespace]:
    """After namespaces were deleted (committed): destroy the key of every subject none of whose
    sessions remain. Returns one erased namespace per key destroyed.

    A user who still has sessions keeps the key (their other sessions need it): erasing a
    session or a record of such a user cannot shred, and copies of the erased rows in WAL,
    dead tuples or backups stay readable to whoever holds the key (see ``docs/core/erasure.md``).
    """
    if cipher is None:
        return []
    shredded: list[Namespace] = []
    by_subject = {cipher.subject(ns): ns for ns in erased}
    for subject, ns in by_subject.items():
        if still_used(ns):
            continue
        try:
            if cipher.destroy(subject):
                shredded.append(ns)
        except Exception as e:  # the rows are erased and committed: say so loudly, erase_report shows the key
            log.error("the rows of %s are erased but its key could not be destroyed (%s): erase_report() shows "
                      "it; destroy it in the keyring by hand", _who(ns), e)
    return shredded


def _seal_json(cipher: FieldCipher, ns: Namespace, field: str, value: str) -> str:
    """Seal a value, except an empty JSON list or object of a JSON field (tags, metadata)."""
    if value in _EMPTY_JSON and field in (RECORD_TAGS, RECORD_METADATA):
        return value
    return cipher.seal(ns, field, value)


def cipher_for(keyring: KeyRing | None, journal_uid: str, stored: str | None, where: str) -> FieldCipher | None:
    """The journal's cipher, or ``None`` when encryption is off; refuses an encrypted journal without keyring.

    ``stored`` is the journal's ``meta.encryption`` value (``None``: never encrypted).
    """
    if keyring is None:
        if stored:
            raise KeyUnavailableError(
                f"journal {where} holds encrypted text ({stored}) and was opened without a keyring: open it with "
                "the keyring it was written with, e.g. TieredMemory.open(path, ..., keyring=FolderKeyRing(folder))"
            )
        return None
    if stored and stored != ALGORITHM:
        raise KeyUnavailableError(f"journal {where} is encrypted with {stored!r}, which this langmem-tiers does not "
                                  f"know ({ALGORITHM}): upgrade langmem-tiers")
    return FieldCipher(keyring, journal_uid)
