"""brainmem: a persistent brain for one AI agent, in a single SQLite file.

>>> from brainmem import Brain
>>> with Brain(":memory:") as brain:
...     _ = brain.add("User prefers dark mode.", type="semantic", tags=["ui"])
...     [h.trace.content for h in brain.search("dark mode")]
['User prefers dark mode.']
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .brain import Brain, Hits
from .consolidation import ReflectReport
from .embed import (
    CallableEmbedder,
    Embedder,
    EmbedderError,
    OnnxEmbedder,
    OpenAIEmbedder,
    embedder_from_env,
    embedder_from_spec,
)
from .errors import (
    BrainFileError,
    BrainmemError,
    InvalidInput,
    NotABrainFile,
    NotFound,
    QueryError,
    QuotaExceeded,
    ReadOnlyBrain,
    SchemaTooNew,
    StorageError,
    VersionConflict,
)
from .llm import LLM, LLMError
from .model import Hit, Trace
from .policy import Policy
from .rerank import (
    CallableReranker,
    OnnxReranker,
    Reranker,
    RerankerError,
    reranker_from_env,
    reranker_from_spec,
)
from .tools import ToolContext
from .write import AddResult

if TYPE_CHECKING:
    from .aio import AsyncBrain

__all__ = [
    "AddResult",
    "AsyncBrain",
    "Brain",
    "CallableEmbedder",
    "Embedder",
    "EmbedderError",
    "OnnxEmbedder",
    "OpenAIEmbedder",
    "embedder_from_env",
    "embedder_from_spec",
    "CallableReranker",
    "OnnxReranker",
    "Reranker",
    "RerankerError",
    "reranker_from_env",
    "reranker_from_spec",
    "LLM",
    "LLMError",
    "Hit",
    "Hits",
    "Policy",
    "ReflectReport",
    "ToolContext",
    "Trace",
    "BrainmemError",
    "BrainFileError",
    "InvalidInput",
    "NotABrainFile",
    "NotFound",
    "QueryError",
    "QuotaExceeded",
    "ReadOnlyBrain",
    "SchemaTooNew",
    "StorageError",
    "VersionConflict",
    "__version__",
]


def __getattr__(name: str) -> Any:
    """``AsyncBrain`` is imported when first asked for: its asyncio (which imports ssl
    and socket) was ~50 ms of every ``import brainmem``, each CLI command's included."""
    if name == "AsyncBrain":
        from .aio import AsyncBrain

        return AsyncBrain
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
