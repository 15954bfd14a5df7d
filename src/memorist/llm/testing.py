"""A scripted LLM for tests and examples: no network, fully deterministic.

>>> from memorist.llm.testing import ScriptedLLM
>>> llm = ScriptedLLM(['{"facts": ["Likes tea"]}'])
>>> llm.generate("I like tea")
'{"facts": ["Likes tea"]}'
>>> llm.requests[0].messages[-1].content
'I like tea'
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import ProviderError
from .base import LLM, LLMRequest, LLMResponse

Reply = str | dict | list | BaseException | Callable[[LLMRequest], Any]


def _tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


class ScriptedLLM(LLM):
    """Replies from a script, in order.

    Each entry is a string (the reply), a dict or list (sent as JSON), an exception
    (raised, e.g. :class:`~memorist.errors.TransientProviderError` to test retries),
    or a callable that receives the :class:`~memorist.llm.base.LLMRequest` and returns
    any of those. ``script`` may also be a single callable, used for every request.
    When the script runs out, ``default`` is used (if given), else a
    :class:`~memorist.errors.ProviderError` says so. Every request is kept in
    ``requests``. Token counts are estimated at four characters a token.
    """

    provider = "scripted"

    def __init__(
        self,
        script: Iterable[Reply] | Callable[[LLMRequest], Any] = (),
        *,
        model: str = "scripted",
        default: Reply | None = None,
        **options: Any,
    ) -> None:
        options.setdefault("backoff", 0.0)
        super().__init__(model, **options)
        self._responder = script if callable(script) else None
        self._script: list[Reply] = [] if callable(script) else list(script)
        self.default = default
        self.requests: list[LLMRequest] = []
        self._script_lock = threading.Lock()

    def push(self, *replies: Reply) -> None:
        """Append replies to the script."""
        with self._script_lock:
            self._script.extend(replies)

    @property
    def remaining(self) -> int:
        return len(self._script)

    def _next(self, request: LLMRequest) -> Any:
        with self._script_lock:
            self.requests.append(request)
            if self._responder is not None:
                return self._responder(request)
            if self._script:
                return self._script.pop(0)
        if self.default is not None:
            return self.default
        raise ProviderError(f"{self.name}: the script has no reply left for request {len(self.requests)}")

    def _generate(self, request: LLMRequest) -> LLMResponse:
        reply = self._next(request)
        if callable(reply) and not isinstance(reply, BaseException | type):
            reply = reply(request)
        if isinstance(reply, BaseException):
            raise reply
        text = reply if isinstance(reply, str) else json.dumps(reply)
        prompt = request.system + "".join(m.content for m in request.messages)
        return LLMResponse(text=text, model=self.model, input_tokens=_tokens(prompt), output_tokens=_tokens(text))


__all__ = ["ScriptedLLM"]
