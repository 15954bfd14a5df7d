"""Memorist inside agent frameworks: :mod:`memorist.integrations.langgraph`
(``MemoristStore``, a LangGraph long-term store; needs ``pip install 'memorist[agent]'``)."""
