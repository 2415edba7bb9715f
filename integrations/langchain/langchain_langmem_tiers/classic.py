"""``TieredConversationMemory``: a langchain-classic ``BaseMemory`` for legacy chains.

A drop-in for ``ConversationSummaryBufferMemory`` / ``ConversationBufferMemory`` in
``ConversationChain`` and ``LLMChain`` code: the history is journaled durably and
``load_memory_variables`` returns the budgeted context with recall for the new input.
Needs ``pip install 'langchain-langmem-tiers[classic]'``.
"""

from __future__ import annotations

from typing import Any

try:
    from langchain_classic.base_memory import BaseMemory
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "TieredConversationMemory needs langchain-classic: pip install 'langchain-langmem-tiers[classic]'"
    ) from e
from langchain_core.messages import AIMessage, HumanMessage, get_buffer_string
from langmem_tiers import ConfigError, TieredMemory
from pydantic import ConfigDict

from langchain_langmem_tiers.messages import from_langchain, messages_to_langchain


class TieredConversationMemory(BaseMemory):
    """langchain-classic memory over a :class:`langmem_tiers.TieredMemory`.

    Example:
        >>> import tempfile
        >>> from langmem_tiers import ConfigError, TieredMemory
        >>> memory = TieredConversationMemory(
        ...     memory=TieredMemory.open(tempfile.mkdtemp(), session_id="s1", embedder=False))
        >>> memory.save_context({"input": "I am Ada"}, {"response": "Hi Ada"})
        >>> memory.load_memory_variables({"input": "who am I?"})["history"]
        'Human: I am Ada\\nAI: Hi Ada'
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: TieredMemory
    memory_key: str = "history"
    input_key: str | None = None
    output_key: str | None = None
    return_messages: bool = False
    human_prefix: str = "Human"
    ai_prefix: str = "AI"
    budget: int | None = None

    @property
    def memory_variables(self) -> list[str]:
        """The one variable this memory fills: ``memory_key``."""
        return [self.memory_key]

    def _input(self, inputs: dict[str, Any], *, required: bool) -> str | None:
        """The user's input among ``inputs``; ``None`` when there is none and none is required.

        Raises:
            ConfigError: ``input_key`` is missing from ``inputs``, or several keys could be the
                input and ``input_key`` is not set (the message names the keys).
        """
        if self.input_key is not None:
            if self.input_key not in inputs:
                raise ConfigError(
                    f"input_key {self.input_key!r} is missing from the inputs (keys: {sorted(inputs)}): "
                    "pass it, or set input_key to the key that holds the user's input"
                )
            return str(inputs[self.input_key])
        # As langchain-classic's memories: the input is the one key that is neither ours nor "stop".
        candidates = sorted(k for k in inputs if k not in (self.memory_key, "stop"))
        if len(candidates) == 1:
            return str(inputs[candidates[0]])
        if not candidates and not required:
            return None
        raise ConfigError(
            f"one input key expected besides {self.memory_key!r} and 'stop', got {candidates}: "
            "set input_key to the key that holds the user's input"
        )

    def _output(self, outputs: dict[str, Any]) -> str:
        if self.output_key is not None:
            if self.output_key not in outputs:
                raise ConfigError(
                    f"output_key {self.output_key!r} is missing from the outputs (keys: {sorted(outputs)}): "
                    "set output_key to the key that holds the model's reply"
                )
            return str(outputs[self.output_key])
        if len(outputs) == 1:
            return str(next(iter(outputs.values())))
        for key in ("response", "output", "text", "answer"):
            if key in outputs:
                return str(outputs[key])
        raise ConfigError(
            f"one output key expected, got {sorted(outputs)} (none of them response, output, text or "
            "answer): set output_key to the key that holds the model's reply"
        )

    def _render(self, messages: list[Any]) -> dict[str, Any]:
        if self.return_messages:
            return {self.memory_key: messages}
        return {
            self.memory_key: get_buffer_string(
                messages, human_prefix=self.human_prefix, ai_prefix=self.ai_prefix
            )
        }

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """The budgeted context: summary, recall keyed on the input in ``inputs``, window.

        With no input at all (``{}``) recall is keyed on the last stored user message.
        Recall reaches the user's other sessions as the memory's ``config.recall_scope`` says.
        """
        context = self.memory.context(self._input(inputs, required=False), self.budget)
        return self._render(messages_to_langchain(context.messages))

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Async :meth:`load_memory_variables`."""
        context = await self.memory.acontext(self._input(inputs, required=False), self.budget)
        return self._render(messages_to_langchain(context.messages))

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, str]) -> None:
        """Journal the turn (user input and model output)."""
        self.memory.add_messages(
            [
                from_langchain(HumanMessage(self._input_or_fail(inputs))),
                from_langchain(AIMessage(self._output(outputs))),
            ]
        )

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, str]) -> None:
        """Async :meth:`save_context`."""
        await self.memory.aadd_messages(
            [
                from_langchain(HumanMessage(self._input_or_fail(inputs))),
                from_langchain(AIMessage(self._output(outputs))),
            ]
        )

    def _input_or_fail(self, inputs: dict[str, Any]) -> str:
        text = self._input(inputs, required=True)
        assert text is not None  # required=True raises instead
        return text

    def clear(self) -> None:
        """Erase the session."""
        self.memory.clear()

    async def aclear(self) -> None:
        """Async :meth:`clear`."""
        await self.memory.aclear()
