"""``TieredRunnableWithMessageHistory``: ``RunnableWithMessageHistory`` with recall keyed on the input.

``RunnableWithMessageHistory`` reads the history (``_enter_history``) before the new
input is stored, so a tiered history would recall for the *previous* question. This
subclass takes the same arguments and changes two private hooks of langchain-core:

* ``_merge_configs`` (runs once per request and puts the request's history into its
  config): a :class:`TieredChatMessageHistory` is replaced by a per-request view on the
  same memory, so nothing a request loads is seen by another request;
* ``_enter_history`` / ``_aenter_history``: the view loads the context with recall for
  the request's own input (the text of its last human message) and holds it, so the
  second read RWMH makes after the run (to slice the history off the input) agrees.

Histories of other classes behave exactly as under ``RunnableWithMessageHistory``.
These hooks are private in langchain-core: the versions they were checked against are
pinned in ``pyproject.toml`` and ``tests/test_lc_runnable.py`` fails if they change shape.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.history import RunnableWithMessageHistory

from langchain_langmem_tiers.history import TieredChatMessageHistory


class TieredRunnableWithMessageHistory(RunnableWithMessageHistory):
    """``RunnableWithMessageHistory`` whose tiered history recalls for the input being answered.

    Same arguments and the same behaviour as ``RunnableWithMessageHistory``; with a
    :class:`TieredChatMessageHistory` (e.g. from :meth:`TieredChatMessageHistory.factory`)
    the model input holds what is recalled for *this* request's question, in ``invoke``,
    ``ainvoke``, ``stream``, ``astream`` and ``batch``, and concurrent requests on one
    session each get recall for their own input. Recall is keyed on the text of the
    last ``HumanMessage`` of the input; an input without one (e.g. a tool result) keys
    recall on the last stored user message.

    Example:
        >>> import tempfile, warnings
        >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
        >>> get_history = TieredChatMessageHistory.factory(tempfile.mkdtemp(), embedder=False)
        >>> with warnings.catch_warnings():  # RunnableWithMessageHistory is deprecated upstream
        ...     warnings.simplefilter("ignore")
        ...     chain = TieredRunnableWithMessageHistory(FakeListChatModel(responses=["Hi!"]), get_history)
        >>> chain.invoke("Hello, I am Ada", {"configurable": {"session_id": "s1"}}).content
        'Hi!'
        >>> [m.type for m in get_history("s1").messages]
        ['human', 'ai']
        >>> get_history.close()
    """

    def _merge_configs(self, *configs: RunnableConfig | None) -> RunnableConfig:
        config = super()._merge_configs(*configs)
        history = config["configurable"]["message_history"]
        if isinstance(history, TieredChatMessageHistory):
            config["configurable"]["message_history"] = history.request_view()
        return config

    def _enter_history(self, value: Any, config: RunnableConfig) -> list[BaseMessage]:
        history = config["configurable"]["message_history"]
        if isinstance(history, TieredChatMessageHistory):
            history.load_context(self._query(value))
        return super()._enter_history(value, config)

    async def _aenter_history(self, value: Any, config: RunnableConfig) -> list[BaseMessage]:
        history = config["configurable"]["message_history"]
        if isinstance(history, TieredChatMessageHistory):
            await history.aload_context(self._query(value))
        return await super()._aenter_history(value, config)

    def _query(self, value: Any) -> str | None:
        """The text of the last human message of the request's input (what recall is keyed on)."""
        try:
            messages = self._get_input_messages(value)
        except KeyError as e:
            raise ValueError(
                f"cannot find the input messages in the keys {sorted(value)}: set input_messages_key "
                "to the key that holds the user's input"
            ) from e
        for message in reversed(messages):
            if isinstance(message, HumanMessage):
                return message.text or None
        return None
