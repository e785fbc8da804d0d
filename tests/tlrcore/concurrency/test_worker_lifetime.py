"""tlrcore.concurrency.processes: the worker processes end with the caller, however it
ends. A process that builds a TLR matrix on its workers and is then killed (``SIGKILL``,
as the OOM killer does; ``SIGTERM``, as ``timeout`` and batch schedulers do), or
interrupted (``SIGINT``, Ctrl-C), leaves no worker running: forked from the caller's
main thread, each worker gets the kernel's parent-death signal; forked from another
thread, it watches the caller from a thread of its own, and outlives the thread that
forked it. A worker whose caller ended between its fork and its start exits at once."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="the workers are forked on Linux only"
)

REPOSITORY = Path(__file__).resolve().parents[3]
#: Generous bounds on waits that take well under a second on an idle machine.
READY_WAIT, END_WAIT = 120.0, 30.0

#: The caller: forks the workers (from its main thread, or from a thread that then ends),
#: builds a matrix on them while it holds them (each block call leaves a file named after
#: its process in the folder), marks itself ready, and waits to be ended.
CALLER = """
import os, sys, threading, time
from pathlib import Path

import numpy as np
import tlrcore as tlr
from tlrcore.concurrency import processes as worker_processes

N, TILE = 1200, 200


class Exponential:
    def __init__(self, X, folder):
        self.X, self.folder = X, folder

    def __call__(self, rows, cols):
        (self.folder / f"served-{os.getpid()}").touch()
        C = np.exp(-np.abs(self.X[rows][:, None] - self.X[cols][None, :]) / 0.2)
        C[rows[:, None] == cols[None, :]] += 0.01
        return C


folder, forking_thread = Path(sys.argv[1]), sys.argv[2]
if forking_thread == "other":
    forker = threading.Thread(target=worker_processes.start)
    forker.start()
    forker.join()  # the thread that forked the workers has ended
X = np.sort(np.random.default_rng(0).uniform(size=N))
with worker_processes.hold(TILE):
    tlr.TLRMatrix.from_generator(Exponential(X, folder), N, TILE, accuracy=1e-9, method="aca")
    (folder / "ready").touch()
    time.sleep(600)
"""

#: A caller whose worker (forked from its main thread) waits for the file "go" before it
#: arranges to end with the caller, as a worker does when it starts: the test kills the
#: caller in between, as the caller's end may fall between a worker's fork and its start.
LATE_START = """
import multiprocessing, sys, time
from pathlib import Path

from tlrcore.concurrency import processes as worker_processes


def worker(folder):
    while not (folder / "go").exists():
        time.sleep(0.05)
    worker_processes._end_with_the_caller()
    (folder / "survived").touch()


folder = Path(sys.argv[1])
child = multiprocessing.get_context("fork").Process(target=worker, args=(folder,))
child.start()
(folder / "ready").touch()
child.join()
"""


def children(pid):
    """The processes whose parent is `pid`, from ``/proc``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # ended meanwhile
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def running(pid):
    """Whether process `pid` runs: it exists and is not a zombie (an orphan's new parent
    may never reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def wait_until(condition, seconds):
    """Poll `condition` until it holds or `seconds` pass; whether it held."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def start_caller(folder, script, *args):
    """The caller running `script` with `args`, started and ready (it made the file
    "ready" in `folder`)."""
    env = {
        **os.environ,
        "TLRCORE_PROCESSES": "1",
        "TLRCORE_NUM_THREADS": "2",
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(REPOSITORY), os.environ.get("PYTHONPATH")])
        ),
    }
    with open(folder / "log", "wb") as log:
        caller = subprocess.Popen(
            [sys.executable, "-c", script, str(folder), *args],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    ready = wait_until(lambda: (folder / "ready").exists() or caller.poll() is not None, READY_WAIT)
    if not (ready and caller.poll() is None):
        caller.kill()
        caller.wait()
        pytest.fail(f"the caller did not get ready:\n{(folder / 'log').read_text()}")
    return caller


@pytest.mark.parametrize("forking_thread", ["main", "other"])
@pytest.mark.parametrize(
    "ending", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name
)
def test_no_worker_outlives_the_caller(tmp_path, ending, forking_thread):
    caller = start_caller(tmp_path, CALLER, forking_thread)
    workers = children(caller.pid)
    try:
        served = {int(path.name.split("-")[1]) for path in tmp_path.glob("served-*")}
        # the workers served the build (with forking_thread="other": after the thread
        # that forked them ended); every child of the caller must end with it
        assert served - {caller.pid} and served - {caller.pid} <= workers
        caller.send_signal(ending)
        caller.wait(END_WAIT)
        assert wait_until(lambda: not any(running(pid) for pid in workers), END_WAIT), (
            f"workers {sorted(pid for pid in workers if running(pid))} outlived the caller"
        )
    finally:
        reap(caller, workers)


def reap(caller, workers):
    """Kill the caller and any worker left, whatever the test found."""
    caller.kill()
    caller.wait()
    for pid in workers:
        if running(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_worker_whose_caller_ended_before_it_started_exits(tmp_path):
    caller = start_caller(tmp_path, LATE_START)
    workers = children(caller.pid)
    try:
        assert len(workers) == 1
        caller.kill()
        caller.wait(END_WAIT)
        (tmp_path / "go").touch()
        assert wait_until(lambda: not any(running(pid) for pid in workers), END_WAIT)
        assert not (tmp_path / "survived").exists()
    finally:
        reap(caller, workers)
