"""Resource limits of the invoking user's processes: `limits.memlock_bytes`,
`limits.memlock_hard_bytes`, `limits.memlock_unlimited`.

/proc/self/limits, row "Max locked memory" (soft limit, bytes; proc(5)); "unlimited" leaves
memlock_bytes absent and sets memlock_unlimited = true. In a snapshot the file is the one the
capture process saw (the user's own limits). On a live host resource.getrlimit(RLIMIT_MEMLOCK)
is used when the file cannot be read.

Also the `command_signatures` collector: some vendor tools print a failure that names a
host-side cause (XRT's `mmap(... len=67108864 ...) failed (err=-11)` is RLIMIT_MEMLOCK,
https://github.com/Xilinx/XRT/pull/9132). A probe lists those commands and the
`[[signature]]` ids to look for in their output (stdout and stderr, whatever the exit code);
each match becomes a log_events[] entry with scope "command", like a kernel or runtime log
line. The commands are the canonical argvs other probes run, so the per-check command cache
means they are not run twice.
"""

from __future__ import annotations

from ..errors import CommandNotFound, HostError
from ..parsers.proc import parse_limits
from ..probes import NoData, ProbeContext, ProbeError
from ..registry import collector
from .logs import _add_events, match_signatures

MEMLOCK_ROW = "Max locked memory"


@collector("limits")
def collect_limits(ctx: ProbeContext) -> None:
    text = ctx.read("/proc/self/limits")
    soft = hard = None
    source = "/proc/self/limits"
    if text:
        try:
            row = parse_limits(text).get(MEMLOCK_ROW)
        except ValueError as e:
            raise ProbeError(f"/proc/self/limits: {e}") from None
        if row:
            soft, hard = row["soft"], row["hard"]
    if soft is None and ctx.host.source == "live":
        import resource

        s, h = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        inf = resource.RLIM_INFINITY
        soft = "unlimited" if s == inf else s
        hard = "unlimited" if h == inf else h
        source = "getrlimit(RLIMIT_MEMLOCK)"
    if soft is None:
        raise NoData("no /proc/self/limits")
    if soft == "unlimited":
        ctx.facts.set("limits.memlock_unlimited", True, source)
    else:
        ctx.facts.set("limits.memlock_bytes", int(soft), source)
        ctx.facts.set("limits.memlock_unlimited", False, source)
    if isinstance(hard, int):
        ctx.facts.set("limits.memlock_hard_bytes", hard, source)


@collector("command_signatures")
def collect_command_signatures(ctx: ProbeContext) -> None:
    """args: commands = [[argv...], ...], signatures = ["signature-id", ...]."""
    wanted = set(ctx.args.get("signatures", []))
    sigs = [s for s in ctx.options.get("signatures", []) if s.id in wanted]
    if not sigs:
        raise NoData("no signatures to look for")
    ran = 0
    for argv in ctx.args.get("commands", []):
        try:
            res = ctx.run([str(a) for a in argv])
        except (CommandNotFound, HostError):
            continue
        ran += 1
        name = " ".join(argv)
        text = res.stdout + ("\n" + res.stderr if res.stderr else "")
        events = match_signatures(text, name, sigs, "command")
        _add_events(ctx, events)
    if not ran:
        raise NoData("none of the commands is installed")
    if not ctx.facts.data:
        raise NoData(f"no known failure in the output of {ran} command(s)")
