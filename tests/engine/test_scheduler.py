from __future__ import annotations

import subprocess
import sys

import pytest

from ember.engine.block_manager import BlockManager
from ember.engine.errors import EngineError
from ember.engine.scheduler import Scheduler, SchedulerConfig
from ember.engine.sequence import SeqStatus, Sequence


def _sched(num_blocks: int = 32, **config: int) -> Scheduler:
    return Scheduler(SchedulerConfig(**config), BlockManager(num_blocks, 4))


def _complete(sched: Scheduler) -> None:
    """Pretend the planned forward ran: mark the tokens computed, sample a token if due."""
    out = sched.schedule()
    for item in out.scheduled:
        item.seq.num_processed += item.num_tokens
        if not item.seq.num_pending:
            item.seq.token_ids.append(9)


def test_no_torch_in_bookkeeping() -> None:
    code = (
        "import sys\n"
        "for m in ('sequence', 'block_manager', 'streaming', 'scheduler', 'engine', 'runners.fake'):\n"
        "    __import__('ember.engine.' + m)\n"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_chunked_prefill_then_decode() -> None:
    sched = _sched(prefill_chunk=8, max_batch_tokens=8)
    seq = Sequence(list(range(20)))
    sched.add(seq)
    sizes = []
    for _ in range(4):
        out = sched.schedule()
        sizes.append([i.num_tokens for i in out.scheduled])
        for item in out.scheduled:
            item.seq.num_processed += item.num_tokens
            if not item.seq.num_pending:
                item.seq.token_ids.append(1)
    assert sizes == [[8], [8], [4], [1]]


def test_decode_and_prefill_share_a_step_under_the_token_budget() -> None:
    sched = _sched(prefill_chunk=16, max_batch_tokens=10)
    first = Sequence(list(range(5)))
    sched.add(first)
    _complete(sched)
    second = Sequence(list(range(100, 130)))
    sched.add(second)
    out = sched.schedule()
    assert [(i.seq, i.num_tokens) for i in out.scheduled] == [(first, 1), (second, 9)]


def test_waits_when_blocks_do_not_fit_first_come_first_served() -> None:
    sched = _sched(num_blocks=6, prefill_chunk=64, max_batch_tokens=64)
    big = Sequence(list(range(20)))  # 5 blocks + 1 for its first sample
    sched.add(big)
    _complete(sched)
    late = Sequence(list(range(50, 58)))
    tiny = Sequence([1])
    sched.add(late)
    sched.add(tiny)
    out = sched.schedule()
    assert [i.seq for i in out.scheduled] == [big]
    assert late.status is SeqStatus.WAITING and late.last_reason == "wait"
    assert tiny.status is SeqStatus.WAITING  # does not jump the queue


def test_preempts_newest_when_running_sequence_cannot_grow() -> None:
    sched = _sched(num_blocks=4, prefill_chunk=64, max_batch_tokens=64)
    a, b = Sequence(list(range(7))), Sequence(list(range(50, 57)))
    sched.add(a)
    sched.add(b)
    _complete(sched)  # both prefilled: 2 blocks each, pool full
    _complete(sched)  # a: 8 tokens, b: 8 tokens, both exactly 2 blocks
    out = sched.schedule()  # a needs a 3rd block: b is preempted
    assert out.preempted == [b] and b.num_preemptions == 1
    assert b.last_reason == "wait"  # preempted, then it waits for blocks again
    assert b.block_table == [] and b.num_processed == 0 and sched.waiting[0] is b
    assert [i.seq for i in out.scheduled] == [a]


def test_abort_frees_blocks_and_unknown_is_none() -> None:
    sched = _sched()
    seq = Sequence(list(range(9)))
    sched.add(seq)
    _complete(sched)
    assert sched.blocks.num_used_blocks == 3
    assert sched.abort(seq.seq_id) is seq
    assert sched.blocks.num_used_blocks == 0 and seq.finish_reason == "abort"
    assert sched.abort(12345) is None and not sched.has_work


def test_prompt_longer_than_ctx_is_refused() -> None:
    with pytest.raises(EngineError, match="does not fit"):
        _sched(max_seq_tokens=16).add(Sequence(list(range(16))))


def test_max_batch_seqs() -> None:
    sched = _sched(max_batch_seqs=2)
    for i in range(3):
        sched.add(Sequence([i, i + 1]))
    out = sched.schedule()
    assert len(out.scheduled) == 2 and len(sched.waiting) == 1
