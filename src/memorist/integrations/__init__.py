"""Memorist inside agent frameworks (docs/integrations.md), each behind an extra:

- :mod:`memorist.integrations.langgraph`: ``MemoristStore``, a LangGraph long-term
  store (``pip install 'memorist[agent]'``);
- :mod:`memorist.integrations.openai_agents`: ``memory_tools``, memory tools for the
  OpenAI Agents SDK (``pip install 'memorist[openai-agents]'``);
- :mod:`memorist.integrations.langchain`: ``memory_tools`` and the ``BaseTool`` classes,
  memory tools for LangChain (``pip install 'memorist[langchain]'``).
"""
