"""The process-wide verdict cache: shared across envs, one run per distinct job however many ask, bounded, keyed by
a hash that includes the limits. Counting executors make "how many sandbox runs" observable."""

from __future__ import annotations

import copy
import pickle
import threading
from collections import Counter
from typing import Any

import pytest

from llm_marl_envs.sandbox import (
    CachingExecutor,
    Executor,
    SandboxLimits,
    TestJob,
    TestOutcome,
    TestReport,
    shared_executor,
    verdict_key,
)
from llm_marl_envs.sandbox.local import LocalExecutor

ADD = "def add(a, b):\n    return a + b\n"
TESTS = ["assert add(1, 2) == 3"]


class FakeExecutor(Executor):
    """Passes every test without running anything; counts runs per program and inner ``run_many`` batches.

    ``gate``: each run waits for it (up to 5 s), so a test can hold a run in flight while other callers arrive.
    ``fail``: runs raise it instead.
    """

    backend = "fake"

    def __init__(self, limits: SandboxLimits | None = None, gate: threading.Event | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self.gate, self.fail = gate, None
        self.runs: Counter[str] = Counter()
        self.started = threading.Event()
        self.batches: list[int] = []
        self._lock = threading.Lock()

    def run_many(self, jobs: Any, max_workers: int | None = None) -> list[TestReport]:
        self.batches.append(len(jobs))
        return super().run_many(jobs, max_workers)

    def _execute(self, job: dict[str, Any]) -> TestReport:
        with self._lock:
            self.runs[job["code"]] += 1
        self.started.set()
        if self.gate is not None:
            self.gate.wait(5)
        if self.fail is not None:
            raise self.fail
        outcomes = tuple(TestOutcome(i, test, "passed") for i, test in enumerate(job["tests"]))
        return TestReport(len(outcomes), len(outcomes), outcomes, False, 0.001, backend=self.backend)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        for name in ("gate", "started", "_lock"):
            state.pop(name)
        return state


class CountingLocalExecutor(LocalExecutor):
    """The real local backend, counting the programs it runs."""

    def __init__(self) -> None:
        super().__init__(SandboxLimits(timeout_s=3.0))
        self.runs = 0
        self._count_lock = threading.Lock()  # run_many calls _execute from several threads

    def _execute(self, job: dict[str, Any]) -> TestReport:
        with self._count_lock:
            self.runs += 1
        return super()._execute(job)


def coding_env(executor: Executor | str, **kwargs: Any) -> Any:
    from llm_marl_envs import coding_v0

    return coding_v0.parallel_env(num_agents=2, dataset="decomposable", similarity="tfidf", executor=executor,
                                  **{"scheme": "magrpo", **kwargs})  # the aux/main actions below


def joint_action(env: Any, version: int) -> dict[str, str]:
    entry = env.task["entry_point"]
    return {
        "aux": f"```python\ndef aux(x):\n    return x  # v{version}\n```",
        "main": f"```python\ndef {entry}(*args):\n    return aux(args[0])  # v{version}\n```",
    }


def test_envs_on_one_executor_share_one_cache() -> None:
    counting = CountingLocalExecutor()
    first, second = coding_env(counting), coding_env(counting)
    assert first.executor is second.executor and isinstance(first.executor, CachingExecutor)
    assert first.executor.inner is counting
    first.reset(seed=5)
    second.reset(seed=5)
    _, first_rewards, *_ = first.step(joint_action(first, 1))
    runs_of_one_step = counting.runs
    assert runs_of_one_step > 0
    _, second_rewards, *_ = second.step(joint_action(second, 1))
    assert counting.runs == runs_of_one_step  # the same joint action in another env: no sandbox run at all
    assert second_rewards == first_rewards
    second.step(joint_action(second, 2))
    assert counting.runs > runs_of_one_step  # a new action does run
    # A private cache, as before this cache was shared: pass a CachingExecutor of your own.
    private = coding_env(CachingExecutor(counting))
    assert private.executor is not first.executor and private.executor.inner is counting
    assert coding_env(counting, cache_verdicts=False).executor is counting


def test_envs_built_from_a_backend_name_share_executor_and_cache() -> None:
    one, other = coding_env("local"), coding_env("local")
    assert one.executor is other.executor
    assert one.executor is shared_executor("local", SandboxLimits(timeout_s=3.0, memory_mb=256))
    assert coding_env("local", timeout_s=2.0).executor is not one.executor  # other limits, other executor
    bare = coding_env("local", cache_verdicts=False).executor
    assert bare is one.executor.inner and not isinstance(bare, CachingExecutor)


def test_concurrent_identical_misses_run_once() -> None:
    gate = threading.Event()
    fake = FakeExecutor(gate=gate)
    cached = CachingExecutor(fake)
    results: list[TestReport] = []

    def ask() -> None:
        results.append(cached.run(ADD, TESTS))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    threads[0].start()
    assert fake.started.wait(5)  # the first caller's run is in flight...
    for thread in threads[1:]:
        thread.start()
    for _ in range(500):  # ...and the other three have found it there
        if cached.joined == 3:
            break
        threading.Event().wait(0.01)
    gate.set()
    for thread in threads:
        thread.join(5)
    assert fake.runs[ADD] == 1 and (cached.misses, cached.joined, cached.hits) == (1, 3, 0)
    assert len(results) == 4 and all(report is results[0] for report in results)
    assert cached.run(ADD, TESTS) is results[0] and cached.hits == 1


def test_a_failed_run_reaches_every_waiter_and_is_not_remembered() -> None:
    fake = FakeExecutor()
    fake.fail = RuntimeError("engine gone")
    cached = CachingExecutor(fake)
    with pytest.raises(RuntimeError, match="engine gone"):
        cached.run_many([TestJob(ADD, TESTS), TestJob(ADD, TESTS)])  # the duplicate waits on the first, gets the error
    fake.fail = None
    assert cached.run(ADD, TESTS).all_passed and fake.runs[ADD] == 2  # nothing stuck in flight


def test_run_many_sends_only_distinct_misses_in_one_inner_batch() -> None:
    fake = FakeExecutor()
    cached = CachingExecutor(fake)
    cached.run("x = 0", TESTS)
    jobs = [TestJob(f"x = {i % 3}", TESTS) for i in range(9)]  # 3 distinct programs, one of them cached
    reports = cached.run_many(jobs, max_workers=4)
    assert fake.batches == [1, 2]  # the warm-up run, then the two misses together
    assert (cached.hits, cached.misses, cached.joined) == (3, 3, 4)
    assert all(reports[i] is reports[i % 3] for i in range(9))


def test_cache_is_lru_bounded() -> None:
    fake = FakeExecutor()
    cached = CachingExecutor(fake, max_entries=2)
    for code in ("a = 1", "b = 1", "a = 1", "c = 1"):  # "a" is used again, so "b" is the least recent when "c" comes
        cached.run(code, TESTS)
    assert len(cached) == 2
    cached.run("a = 1", TESTS)
    cached.run("b = 1", TESTS)
    assert fake.runs == Counter({"a = 1": 1, "b = 1": 2, "c = 1": 1})
    with pytest.raises(ValueError, match="max_entries: expected a positive int"):
        CachingExecutor(fake, max_entries=0)


def test_key_is_a_digest_of_program_tests_entry_point_and_limits() -> None:
    limits = SandboxLimits()
    key = verdict_key(ADD, TESTS, None, limits)
    assert isinstance(key, bytes) and len(key) == 32
    assert key == verdict_key(ADD, list(TESTS), None, SandboxLimits())
    variants = [
        verdict_key(ADD, TESTS, None, SandboxLimits(timeout_s=1.0)),
        verdict_key(ADD, TESTS, None, SandboxLimits(memory_mb=128)),
        verdict_key(ADD, TESTS, "add", limits),
        verdict_key(ADD, [*TESTS, "assert True"], None, limits),
        verdict_key(ADD + " ", TESTS, None, limits),
        verdict_key(ADD + TESTS[0], [], None, limits),  # same characters, split differently
    ]
    assert len({key, *variants}) == len(variants) + 1
    # The same job on executors with different limits is run again, not served from the other's verdict.
    fast, slow = FakeExecutor(SandboxLimits(timeout_s=1.0)), FakeExecutor(SandboxLimits(timeout_s=3.0))
    assert CachingExecutor(fast).key(ADD, TESTS) != CachingExecutor(slow).key(ADD, TESTS)
    with pytest.raises(TypeError, match="code: expected str, got bytes"):
        verdict_key(b"x", TESTS, None, limits)  # type: ignore[arg-type]


def test_shared_executor_wraps_each_executor_once_and_copies_drop_the_cache() -> None:
    fake = FakeExecutor()
    wrapper = shared_executor(fake)
    assert isinstance(wrapper, CachingExecutor) and shared_executor(fake) is wrapper and wrapper.inner is fake
    assert shared_executor(wrapper) is wrapper and shared_executor(fake, cache=False) is fake
    wrapper.run(ADD, TESTS)
    copied = pickle.loads(pickle.dumps(fake))  # the cache (a lock, futures) stays behind
    assert copied._verdict_cache is None and copied.runs[ADD] == 1
    wrapper_copy = copy.deepcopy(wrapper)
    assert isinstance(wrapper_copy, CachingExecutor) and len(wrapper_copy) == 0 and len(wrapper) == 1
    with pytest.raises(ValueError, match="an Executor instance carries its own limits"):
        shared_executor(fake, SandboxLimits())
    with pytest.raises(ValueError, match="backend: expected one of"):
        shared_executor("podman")
    with pytest.raises(TypeError, match="backend: expected a backend name or an Executor, got int"):
        shared_executor(3)  # type: ignore[arg-type]


def test_the_throughput_benchmarks_group_case_runs_and_one_shared_cache_runs_identical_steps_once() -> None:
    """``sandbox_throughput --group-only`` end to end on the local backend (it broke silently when the default coding
    scheme's agents stopped being ``aux``/``main``): G envs stepping the same joint action reach the sandbox with one
    env step's jobs through the shared cache, and G times as many through per-env caches."""
    from llm_marl_benchmarks.sandbox_throughput import run_group_case

    figures = run_group_case(group=3, repeats=1, pool_size=2, backends=["local"])
    identical, distinct = figures["identical"], figures["distinct"]
    assert figures["backend"] == "local" and figures["group"] == 3
    assert identical["jobs_per_env_step"] > 0
    assert identical["shared_cache_sandbox_runs"] == identical["jobs_per_env_step"]
    assert identical["per_env_cache_sandbox_runs"] == 3 * identical["jobs_per_env_step"]
    assert distinct["shared_cache_sandbox_runs"] == 3 * distinct["jobs_per_env_step"]
    assert distinct["runner_threads_s"] > 0 and distinct["runner_sequential_s"] > 0
