import os

import pytest

from agentensemble.execution._context import new_id


def test_task_ids_are_32_hex_digits_and_distinct() -> None:
    ids = {new_id() for _ in range(10_000)}
    assert len(ids) == 10_000
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


# the child only writes to a pipe and exits: none of the parent's threads is needed there
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_does_not_repeat_its_parents_ids() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        os.write(write, "".join(new_id() for _ in range(3)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        child = pipe.read()
    parent = "".join(new_id() for _ in range(3))
    assert len(child) == 96
    assert child != parent  # without a new seed the child would make the parent's next ids
