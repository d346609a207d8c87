"""Fixtures: a fresh store per test, on /dev/shm when it exists (the emulated NVMM)."""

import os
import tempfile
import uuid

import pytest

import atomfs

SHM = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
POOL_SIZE = "32M"


def pool_path() -> str:
    return os.path.join(SHM, f"atomfs-pytest-{os.getpid()}-{uuid.uuid4().hex[:12]}.pool")


@pytest.fixture
def path():
    """A pool file path that does not exist yet; removed after the test."""
    p = pool_path()
    yield p
    if os.path.exists(p):
        os.remove(p)


@pytest.fixture
def store(path):
    """A fresh pool store."""
    s = atomfs.create(path, size=POOL_SIZE)
    yield s
    s.close()


@pytest.fixture(params=["pool", "mmio"])
def any_store(request, path, tmp_path):
    """A fresh store of each engine (mmio keeps its files in a temporary home directory)."""
    if request.param == "pool":
        s = atomfs.create(path, size=POOL_SIZE)
    else:
        home = tmp_path / "home"
        home.mkdir()
        s = atomfs.create(path, engine="mmio", size=POOL_SIZE, home=home)
    yield s
    s.close()
