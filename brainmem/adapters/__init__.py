"""Adapters to the frameworks agents are built with; each imports its framework lazily.

* :mod:`.openai_loop` — plain OpenAI function calling: hand ``brain.tools()`` to a
  model and dispatch its tool calls until it answers.
* :mod:`.langgraph` — a LangGraph ``BaseStore`` over a brain (``pip install 'brainmem[langgraph]'``).

MCP (stdio and streamable HTTP) lives in :mod:`brainmem.mcp_server`.
"""
