"""The examples of docs/python.md run as written (pool files moved to a temporary
directory)."""

import os
import re

import pytest

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "docs", "python.md")


def blocks():
    if not os.path.exists(DOC):
        return []
    with open(DOC, encoding="utf-8") as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


@pytest.mark.parametrize("index", range(2))
def test_doc_example_runs(index, tmp_path):
    found = blocks()
    if not found:
        if os.environ.get("ATOMFS_REQUIRE_ALL") == "1":
            pytest.fail(f"{DOC} not found")
        pytest.skip(f"{DOC} not found (the tests run outside the repository)")
    assert len(found) == 2, "docs/python.md has a new example: list it here"
    code = found[index].replace("/dev/shm/", f"{tmp_path}/")
    exec(compile(code, f"docs/python.md example {index + 1}", "exec"), {})
