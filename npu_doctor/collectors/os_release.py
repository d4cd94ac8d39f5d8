"""Operating system identity from os-release(5): `os.id`, `os.version_id`, `os.pretty_name`."""

from __future__ import annotations

from ..errors import NotFound
from ..parsers.os_release import parse_os_release
from ..probes import NoData, ProbeContext, ProbeError
from ..registry import collector

OS_RELEASE_PATHS = ("/etc/os-release", "/usr/lib/os-release")
KEEP = ("id", "id_like", "version_id", "version_codename", "pretty_name", "name")


@collector("os_release")
def collect_os_release(ctx: ProbeContext) -> None:
    for path in OS_RELEASE_PATHS:
        try:
            text = ctx.read_raw(path)
        except NotFound:
            continue
        if not text.strip():
            raise NoData(f"{path} is empty")
        try:
            fields = parse_os_release(text)
        except ValueError as e:
            raise ProbeError(f"{path}: {e}") from None
        for key in KEEP:
            if key in fields:
                ctx.facts.set(f"os.{key}", fields[key], path)
        return
    raise NoData("no os-release file")
