"""perfledger.gc_pause: the collector is off inside the block and back as it was after it, errors included."""

from __future__ import annotations

import gc

import pytest

from perfledger.gc_pause import paused_gc


def test_the_collector_is_off_inside_and_restored_after():
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():  # a nested pause (plan inside the plan command) leaves it off for the outer block
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_an_error_inside_restores_the_collector():
    with pytest.raises(RuntimeError, match="boom"), paused_gc():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_caller_that_paused_it_keeps_it_paused():
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
