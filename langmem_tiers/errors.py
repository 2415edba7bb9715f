"""The exceptions langmem-tiers raises, in one tree.

::

    LangmemTiersError
    ├── ConfigError (ValueError)             a bad setting; names the rule, the value and the fix
    ├── InvalidMessageError (ValueError)     a message that cannot be stored as given
    ├── InvalidNamespaceError (ValueError)   a bad user_id / agent_id / session_id
    ├── TokenizerUnavailableError (RuntimeError)  no local tiktoken encoding, and its one download failed or is off
    ├── JournalError (RuntimeError)          the journal could not be read or written
    │   ├── SchemaVersionError               the file was written by a newer langmem-tiers
    │   ├── SessionErasedError               the session was erased (forget) while this handle was open
    │   └── EncryptionError                  encrypted text could not be sealed or opened
    │       ├── KeyUnavailableError          its key is not in the keyring (destroyed by forget, or another keyring)
    │       └── DecryptionError              authentication failed: the ciphertext was altered or moved
    ├── SummarizerError (RuntimeError)       the summarizer failed; the turns stay pending
    ├── RecallError (RuntimeError)           the embedder or vector store failed; rows stay pending
    │   ├── VectorStoreLockedError           another process owns the embedded Chroma folder
    │   └── EmbeddingInputError              the embedder refused a text (not an outage); ``index`` names it
    ├── MissingDependencyError (ImportError) an optional extra is not installed
    └── MemoryClosedError (RuntimeError)     the memory was used after close()

Every class also subclasses the builtin a caller would naturally catch, so
``except ValueError`` keeps working for validation errors.
"""

from __future__ import annotations


class LangmemTiersError(Exception):
    """Base class of every error raised by langmem-tiers."""


class ConfigError(LangmemTiersError, ValueError):
    """A configuration value breaks a rule."""


class InvalidMessageError(LangmemTiersError, ValueError):
    """A message cannot be stored: bad role, content, tool call or structure."""


class InvalidNamespaceError(LangmemTiersError, ValueError):
    """A namespace id (user, agent or session) is empty, too long or not text."""


class TokenizerUnavailableError(LangmemTiersError, RuntimeError):
    """No local copy of the tiktoken encoding, and its one download failed or downloads are off."""


class JournalError(LangmemTiersError, RuntimeError):
    """The journal could not be read or written (disk full, locked, corrupt)."""


class SchemaVersionError(JournalError):
    """The journal was written by a newer version of langmem-tiers."""


class SessionErasedError(JournalError):
    """The session behind a handle was erased (``forget``) by another handle or process.

    Its namespace id is never reused, so a stale handle can never reach another tenant;
    ``TieredMemory`` re-creates the session cleanly on its next write.
    """


class EncryptionError(JournalError):
    """Encrypted text could not be sealed or opened (see :mod:`langmem_tiers.keyring`)."""


class KeyUnavailableError(EncryptionError):
    """The key that sealed a text is not in the keyring.

    Either ``forget`` destroyed it (crypto-shredding: the text is gone for good), or the
    journal was opened without its keyring, or with another one.
    """


class DecryptionError(EncryptionError):
    """A ciphertext failed authentication: it was altered, or moved to another user, field or journal."""


class SummarizerError(LangmemTiersError, RuntimeError):
    """The summarizer failed or returned unusable text; nothing was lost."""


class RecallError(LangmemTiersError, RuntimeError):
    """The embedder or the vector store failed; the index rows stay pending."""


class VectorStoreLockedError(RecallError):
    """Another process already owns this embedded Chroma folder (two writers corrupt its index).

    Several processes share vectors through a Chroma server: ``chroma run --path FOLDER``
    and ``TieredMemory.open(..., chroma="http://127.0.0.1:8000")``.
    """


class EmbeddingInputError(RecallError):
    """The embedder refused (part of) its input, as opposed to being unreachable.

    Attributes:
        index: position of the refused text in the ``texts`` passed to ``embed``, or
            ``None`` when the model refused the batch without naming a text
            (:func:`langmem_tiers.embedders.embed_each` then bisects to find it).
    """

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


class MissingDependencyError(LangmemTiersError, ImportError):
    """An optional dependency is missing; the message names the install command."""


class MemoryClosedError(LangmemTiersError, RuntimeError):
    """The memory was used after ``close()``."""


def require(module: str, extra: str) -> object:
    """Import an optional dependency or raise MissingDependencyError naming the fix."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependencyError(
            f"{module} is needed for this feature: pip install 'langmem-tiers[{extra}]'"
        ) from e
