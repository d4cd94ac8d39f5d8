"""Running probe specs concurrently against a Host: each probe with its timeout, a failing
probe a result (never an exception that stops the run), then the derivers in order."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import registry
from .errors import AccessDenied, CommandNotFound, HostError, NotFound
from .facts import Facts
from .host import Host
from .probes import CommandCache, NoData, ProbeContext, ProbeError, ProbeResult, ProbeSpec


def _run_one(spec: ProbeSpec, host: Host, commands: CommandCache,
             options: Optional[Dict[str, Any]] = None) -> ProbeResult:
    ctx = ProbeContext(host, spec, commands, options)
    start = time.monotonic()
    res = ProbeResult(id=spec.id, status="ok", area=spec.area)
    try:
        if spec.collector:
            registry.COLLECTORS[spec.collector](ctx)
        else:
            if spec.read:
                text = host.read_text(spec.read)
                source = spec.read
            else:
                argv = spec.run or []
                cr = ctx.run(argv)
                if cr.timed_out:
                    raise ProbeError(f"`{' '.join(argv)}` timed out after {spec.timeout_s:g} s")
                if cr.returncode != 0:
                    last = (cr.stderr or cr.stdout).strip().splitlines()[-1:] or [""]
                    raise ProbeError(f"`{' '.join(argv)}` exited {cr.returncode}: {last[0][:160]}")
                text, source = cr.stdout, cr.source
            try:
                parsed = registry.PARSERS[spec.parser](text)  # type: ignore[index]
            except (ValueError, KeyError, IndexError) as e:
                raise ProbeError(f"unparsable output from {source}: {e}") from None
            ctx.facts.set(spec.into or spec.id, parsed, source)
        if not ctx.facts.data:
            res.status = "no_data"
    except NoData as e:
        res.status, res.error = "no_data", str(e) or None
    except CommandNotFound as e:
        res.status, res.error_kind = "no_data", "missing-tool"
        res.error = f"{e.path}: not installed"
    except AccessDenied as e:
        res.status, res.error_kind, res.error = "error", "access-denied", str(e)
    except NotFound as e:
        res.status, res.error = "no_data", str(e)
    except (ProbeError, HostError) as e:
        res.status, res.error_kind, res.error = "error", "failed", str(e)
    except Exception as e:  # a bug in a collector must not stop the check
        res.status, res.error_kind = "error", "internal"
        res.error = f"internal error: {type(e).__name__}: {e}"
    res.duration_s = time.monotonic() - start
    res.facts = ctx.facts
    return res


#: Workers once a command blocks (or when probes sleep through a sampling window).
SLOW_HOST_WORKERS = 8


def run_probes(host: Host, specs: Sequence[ProbeSpec], max_workers: Optional[int] = None,
               progress: Optional[Callable[[str], None]] = None,
               options: Optional[Dict[str, Any]] = None,
               pool: Optional[Any] = None) -> Tuple[Facts, List[ProbeResult]]:
    """Run every spec concurrently; merge their facts in spec order, then run derivers.

    Returns (facts, results in spec order). A probe still running at its timeout_s is
    reported as an error ("timed out") and its facts are dropped; probe threads are daemons,
    so a probe stuck past its timeout never holds up the exit. max_workers <= 0 runs the
    probes in the calling thread, one after another, with no timeout of their own; None: one
    worker (eight once a command blocks, or with a sampling window), or the calling thread
    when the host cannot block (Host.may_block). `pool` (workerpool.WorkerPool): long-lived threads to run
    the workers on (the watch daemon's), instead of new threads for this run.
    """
    if max_workers is None:
        # one worker: CPU-bound probes in several threads take turns on the GIL (a live
        # check's probes: 48 ms in one thread, 68 ms in eight); more start when a command
        # blocks (below), and sampling windows (--sample) wait side by side
        sampling = float((options or {}).get("sample_s", 0) or 0) > 0
        max_workers = SLOW_HOST_WORKERS if sampling else 1 if host.may_block() else 0
    commands = CommandCache(host)
    commands.limit_from(specs)
    results: Dict[str, ProbeResult] = {}
    if max_workers <= 0:
        # in the calling thread, one after another: the watch loop samples a few cheap probes
        # this way (no thread start-up per sample), and a probe that hangs holds the loop,
        # which stops the watchdog pings as it should
        reuse = (options or {}).get("reuse") or {}
        for spec in specs:
            # `reuse`: results the caller already has (watch's inventory between re-scans)
            results[spec.id] = reuse.get(spec.id) or _run_one(spec, host, commands, options)
        return _finish(host, specs, results, commands)
    lock = threading.Lock()
    todo = list(specs)
    done_ev = {s.id: threading.Event() for s in specs}
    started: Dict[str, float] = {}

    alive = [0]  # workers running (a worker blocked in a hung command still counts)

    def worker() -> None:
        # a small pool pulls specs off the list: starting a thread per probe costs more than
        # most probes (thread start waits for the GIL)
        try:
            while True:
                with lock:
                    if not todo:
                        return
                    spec = todo.pop(0)
                    started[spec.id] = time.monotonic()
                r = _run_one(spec, host, commands, options)
                with lock:
                    late = spec.id in results
                    results.setdefault(spec.id, r)
                done_ev[spec.id].set()
                if late:
                    return  # this worker was replaced when its probe timed out
        finally:
            with lock:
                alive[0] -= 1

    def start_worker() -> None:
        with lock:
            alive[0] += 1
        if pool is not None:
            pool.submit(worker)
        else:
            threading.Thread(target=worker, name="probe-worker", daemon=True).start()

    start = time.monotonic()
    for _ in range(min(max_workers, len(specs))):
        start_worker()
    extra = float((options or {}).get("sample_s", 0) or 0)
    announced = False
    for s in specs:
        while not done_ev[s.id].is_set():
            done_ev[s.id].wait(0.05)
            now = time.monotonic()
            if progress and not announced and now - start > 1.0:
                with lock:
                    waiting = sorted(x.id for x in specs if x.id not in results)
                if waiting:
                    progress("probing: waiting for " + ", ".join(waiting))
                announced = True
            replace = False
            with lock:
                for sid, t0 in started.items():
                    spec = next(x for x in specs if x.id == sid)
                    if sid not in results and now - t0 > spec.timeout_s + 0.5 + extra:
                        results[sid] = ProbeResult(
                            id=sid, status="error", error_kind="timeout", area=spec.area,
                            error=f"timed out after {spec.timeout_s:g} s", duration_s=now - t0)
                        done_ev[sid].set()
                        replace = True
            if replace:
                start_worker()  # the stuck worker is lost to this run; the rest go on
            if todo:
                # workers waiting on a slow or hung command do not hold the probes queued
                # behind them: a host where a command blocks gets SLOW_HOST_WORKERS at once,
                # plus one per blocked worker, so the next hung tools start waiting now and
                # every hang ends within one timeout of the first
                blocked = commands.blocked()
                limit = max(max_workers, SLOW_HOST_WORKERS) if blocked else max_workers
                with lock:
                    more = min(len(todo), limit + blocked - alive[0])
                for _ in range(max(0, more)):
                    start_worker()
    return _finish(host, specs, results, commands)


def _finish(host: Host, specs: Sequence[ProbeSpec], results: Dict[str, ProbeResult],
            commands: Optional[CommandCache] = None) -> Tuple[Facts, List[ProbeResult]]:
    """Merge the probes' facts in spec order, add the command outputs that were cut
    (`truncated`), then run the derivers."""
    facts = Facts()
    ordered = [results[s.id] for s in specs]
    for r in ordered:
        facts.merge(r.facts)
    if commands is not None and commands.cut:
        from .host.base import keeps_newest
        from .truncation import add, for_command

        for res in sorted(commands.cut, key=lambda r: r.argv):
            newest = keeps_newest(res.argv)
            add(facts, [for_command(res.argv, k, n, len(getattr(res, k).encode("utf-8", "replace")),
                                    newest) for k, n in sorted(res.cut.items())], res.source)
    for fn in registry.derivers_in_order():
        try:
            fn(facts, host)
        except Exception as e:  # a deriver bug degrades to a missing fact, not a crash
            ordered.append(ProbeResult(id=f"derive:{fn.__name__}", status="error",
                                       error_kind="internal",
                                       error=f"internal error: {type(e).__name__}: {e}"))
    return facts, ordered
