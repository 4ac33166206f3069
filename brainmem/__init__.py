"""brainmem: a persistent brain for one AI agent, in a single SQLite file.

>>> from brainmem import Brain
>>> with Brain(":memory:") as brain:
...     _ = brain.add("User prefers dark mode.", type="semantic", tags=["ui"])
...     [h.trace.content for h in brain.search("dark mode")]
['User prefers dark mode.']
"""

from __future__ import annotations

from ._version import __version__
from .aio import AsyncBrain
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
