"""blas.one_thread: numpy's OpenBLAS runs on one thread inside the block and gets its count back after; the report
of a small checkpoint gathers its sections inside it, and its answers are those of two threads, bit for bit."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import numpy as np
import pytest

import embscope
from embscope import blas
from embscope.analysis import report as report_module
from embscope.analysis.report import ONE_THREAD_VALUES, gather, largest_table
from embscope.sample import default_checkpoint

calls = blas.openblas_threads()
needs_openblas = pytest.mark.skipif(calls is None, reason="numpy's BLAS here is not an OpenBLAS this finds")


@pytest.fixture
def two_threads() -> Iterator[Callable[[], int]]:
    """OpenBLAS set to two threads for the test, its count put back after; the getter."""
    assert calls is not None
    get, put = calls
    before = get()
    put(2)
    try:
        yield get
    finally:
        put(before)


@needs_openblas
def test_one_thread_inside_and_the_count_put_back_after_nested_blocks(two_threads):
    get = two_threads
    with blas.one_thread():
        assert get() == 1
        with blas.one_thread():
            assert get() == 1
        assert get() == 1  # the inner block's end leaves the outer one's setting
    assert get() == 2


@needs_openblas
def test_blocks_in_two_threads_leave_the_count_as_it_was(two_threads):
    get = two_threads
    entered, leave = threading.Barrier(2), threading.Event()
    seen: list[int] = []

    def inside() -> None:  # enters while the main thread's block is open, ends after it
        with blas.one_thread():
            entered.wait()
            leave.wait()
            seen.append(get())

    worker = threading.Thread(target=inside, daemon=True)  # a failed assertion below leaves it waiting, not the run
    with blas.one_thread():
        worker.start()
        entered.wait()
    assert get() == 1  # the worker's block is still open
    leave.set()
    worker.join()
    assert seen == [1] and get() == 2


@needs_openblas
def test_the_small_sample_is_gathered_on_one_thread_with_the_answers_of_two(monkeypatch):
    emb = embscope.open(default_checkpoint())
    assert largest_table(emb) == 1024 * 128 <= ONE_THREAD_VALUES  # the sample's token table is its largest
    assert calls is not None
    get, _ = calls
    seen: list[int] = []
    norms_of = report_module.norms_of
    monkeypatch.setattr(report_module, "norms_of", lambda e: seen.append(get()) or norms_of(e))
    one = gather([], lambda path: emb)
    monkeypatch.setattr(report_module, "ONE_THREAD_VALUES", 0)  # every table past it: the threads as they are
    two = gather([], lambda path: emb)
    assert seen == [1, get()] and get() >= 1
    assert np.array_equal(one.maps["token"].projection.coords, two.maps["token"].projection.coords)
    assert one.geometry["token"].isoscore == two.geometry["token"].isoscore
    assert one.norms["token"].summary.flagged.tolist() == two.norms["token"].summary.flagged.tolist()
