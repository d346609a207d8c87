"""fork: a child must not use the stores it inherited (they refuse every call with EBUSY and
are left alone when the child drops them); it can open stores of its own."""

import errno
import os

import pytest

import atomfs
from conftest import pool_path


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
# An open pool store runs checkpoint threads; Python >= 3.12 warns about fork() then.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_inherited_store_refuses_calls_in_the_child(store):
    store.write_bytes("/f", b"parent")
    f = store.open("/f", "rb", buffering=0)
    pid = os.fork()
    if pid == 0:  # the child: report through the exit status only
        code = 0
        try:
            try:
                store.read_bytes("/f")
                code = 1
            except atomfs.BusyError as e:
                code = 0 if e.errno == errno.EBUSY else 2
            try:
                f.read()
                code = code or 3
            except atomfs.BusyError:
                pass
            own = pool_path()
            with atomfs.create(own, size="8M") as s:
                s.write_bytes("/g", b"child")
                code = code or (0 if s.read_bytes("/g") == b"child" else 4)
            os.remove(own)
            f.close()  # closing inherited objects only forgets them
            store.close()
            code = code or (0 if store.closed else 6)
        except BaseException:
            code = 5
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert f.read() == b"parent"
    f.close()
    store.write_bytes("/f", b"still mine")
    assert store.read_bytes("/f") == b"still mine"
