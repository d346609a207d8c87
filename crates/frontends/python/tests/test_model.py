"""A hypothesis state machine against a dict-of-bytes model: whole-file writes, writes at an
offset, truncations, removals, renames, committed and aborted two-file transactions, and
close + reopen (recovery); after every step the store holds exactly the model."""

import os
import shutil
import tempfile

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import atomfs
from conftest import pool_path

NAMES = st.sampled_from([f"f{i}" for i in range(6)])
DATA = st.binary(max_size=5000)


class StoreModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.path = pool_path()
        self.store = self.create()
        self.model: dict = {}

    def create(self) -> atomfs.Store:
        return atomfs.create(self.path, size="16M", checkpoint_threads=0)

    def reopen_options(self) -> dict:
        return {"checkpoint_threads": 0}

    def teardown(self) -> None:
        self.store.close()
        os.remove(self.path)

    @rule(name=NAMES, data=DATA)
    def write_whole(self, name, data):
        self.store.write_bytes("/" + name, data)
        self.model[name] = data

    @precondition(lambda self: self.model)
    @rule(data=st.data(), chunk=DATA, offset=st.integers(0, 6000))
    def write_at(self, data, chunk, offset):
        name = data.draw(st.sampled_from(sorted(self.model)))
        with self.store.open("/" + name, "r+b") as f:
            f.seek(offset)
            f.write(chunk)
        old = self.model[name]
        if not chunk:
            return  # an empty write changes nothing, not even the size (POSIX)
        grown = old + b"\0" * max(0, offset - len(old))
        self.model[name] = grown[:offset] + chunk + grown[offset + len(chunk):]

    @precondition(lambda self: self.model)
    @rule(data=st.data(), size=st.integers(0, 6000))
    def truncate(self, data, size):
        name = data.draw(st.sampled_from(sorted(self.model)))
        with self.store.open("/" + name, "r+b", buffering=0) as f:
            f.truncate(size)
        old = self.model[name]
        self.model[name] = old[:size] + b"\0" * max(0, size - len(old))

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def remove(self, data):
        name = data.draw(st.sampled_from(sorted(self.model)))
        self.store.remove("/" + name)
        del self.model[name]

    @precondition(lambda self: self.model)
    @rule(data=st.data(), new=NAMES)
    def rename(self, data, new):
        name = data.draw(st.sampled_from(sorted(self.model)))
        self.store.rename("/" + name, "/" + new)
        self.model[new] = self.model.pop(name)

    @precondition(lambda self: len(self.model) >= 2)
    @rule(data=st.data(), a_data=DATA, b_data=DATA, commit=st.booleans())
    def two_file_transaction(self, data, a_data, b_data, commit):
        a, b = data.draw(st.lists(st.sampled_from(sorted(self.model)), min_size=2,
                                  max_size=2, unique=True))
        with self.store.open("/" + a, "r+b") as fa, self.store.open("/" + b, "r+b") as fb:
            try:
                with self.store.transaction(fa, fb):
                    for f, d in ((fa, a_data), (fb, b_data)):
                        f.truncate(0)
                        f.write(d)
                    if not commit:
                        raise KeyboardInterrupt  # any exception aborts
            except KeyboardInterrupt:
                pass
        if commit:
            self.model[a], self.model[b] = a_data, b_data

    @rule()
    def reopen(self):
        self.store.close()
        self.store = atomfs.open(self.path, **self.reopen_options())

    @invariant()
    def store_matches_model(self):
        assert self.store.listdir("/") == sorted(self.model)
        for name, data in self.model.items():
            assert self.store.read_bytes("/" + name) == data, name


class MmioStoreModel(StoreModel):
    """The same machine on the mmio engine (files in a host directory)."""

    def create(self) -> atomfs.Store:
        self.home = tempfile.mkdtemp(prefix="atomfs-model-home-")
        return atomfs.create(self.path, engine="mmio", size="16M", home=self.home)

    def reopen_options(self) -> dict:
        return {}

    def teardown(self) -> None:
        super().teardown()
        shutil.rmtree(self.home)


SETTINGS = settings(max_examples=100, stateful_step_count=30, deadline=None)
StoreModel.TestCase.settings = SETTINGS
MmioStoreModel.TestCase.settings = settings(SETTINGS, max_examples=25)
TestStoreModel = StoreModel.TestCase
TestMmioStoreModel = MmioStoreModel.TestCase
