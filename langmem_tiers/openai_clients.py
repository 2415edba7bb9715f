"""The OpenAI clients shared by the OpenAI summarizer and embedder: built lazily, closed if ours."""

from __future__ import annotations

from typing import Any

from langmem_tiers.errors import require


class OpenAIClients:
    """A sync and an async ``openai`` client, each injected or built on first use.

    Clients passed in belong to the caller and are never closed here.
    """

    def __init__(self, *, client: Any = None, async_client: Any = None, base_url: str | None = None,
                 api_key: str | None = None, timeout: float = 30.0, max_retries: int = 0) -> None:
        self._client = client
        self._async_client = async_client
        self._owns_client = client is None
        self._owns_async_client = async_client is None
        self._options: dict[str, Any] = {
            "base_url": base_url, "api_key": api_key, "timeout": float(timeout), "max_retries": max_retries,
        }

    def sync(self) -> Any:
        if self._client is None:
            openai: Any = require("openai", "openai")
            self._client = openai.OpenAI(**self._options)
        return self._client

    def async_(self) -> Any:
        if self._async_client is None:
            openai: Any = require("openai", "openai")
            self._async_client = openai.AsyncOpenAI(**self._options)
        return self._async_client

    def close(self) -> None:
        """Close the sync client built here."""
        if self._owns_client and self._client is not None:
            self._client.close()
            self._client = None

    async def aclose(self) -> None:
        """Close both clients built here; call from the event loop that used the async one."""
        self.close()
        if self._owns_async_client and self._async_client is not None:
            await self._async_client.close()
            self._async_client = None
