"""Catalogs: vendor status codes and log messages as sourced data (`catalogs/*.toml`).

A catalog is one vendor's (or one kernel subsystem's) list of codes and messages, each entry
taken from the vendor's header, documentation or driver source and carrying that URL. The
format is documented in docs/catalogs.md; in short:

```toml
[catalog]
id = "nvidia-xid"                  # unique, kebab-case
title = "NVIDIA Xid errors"
vendor = "nvidia"                  # optional: accelerator vendor the lines belong to
scope = "kernel"                   # kernel (dmesg) | runtime (logs/, --log) | any
source = "https://docs.nvidia.com/deploy/xid-errors/"   # default source of the entries
generic = false                    # true: vendor-neutral class; a vendor entry on the same
                                   # line wins over it
# Patterns that find a code in a line; named group `code` (and/or `mnemonic`) selects the
# entry, other named groups become event fields:
code_patterns = ['NVRM: Xid \\(PCI:(?P<pci_address>[0-9a-fA-F:.]+)\\): (?P<code>\\d+)']
code_aliases = ["Xid"]             # `npu-doctor explain "Xid 79"`

[[entry]]
code = 79                          # and/or pattern = '...' (a regex with named groups)
mnemonic = "GPU_HAS_FALLEN_OFF_THE_BUS"
meaning = "The GPU stopped answering on PCIe"
rule = "device-unresponsive"       # a contract rule id; or benign = true (raises nothing)
severity = "error"                 # default: the rule's
message = "..."                    # optional template over named groups: {group}
subject = "{driver} {device}"      # optional template
facts = {"drivers.nvidia.version" = "{version}"}   # fact path -> template ({g:kib} etc.)
accelerator = true                 # the line names a device: add/enrich accelerators[]
cleared_by = ["other-entry-key"]   # a later line of that entry (same device) makes this benign
fix = {now = "...", persist = "...", doc = "https://..."}
example = ["a message in the vendor's documented format"]  # a test matches each
source = "https://..."             # where the code or message is defined
```

Matching is line by line over the kernel log (`dmesg`, `journalctl -k`) and runtime logs
(snapshot `logs/`, `--log`), whatever wraps the line: dmesg timestamps, syslog and journald
prefixes, rsyslog's `#012` escapes are stripped first (`strip_prefix`). Identical messages
become one event with a `count`. Every regex is prefiltered by the longest literal it needs,
so a line no entry can match costs one scan of a combined needle pattern.
"""

from typing import Any

from .logtext import iter_lines, literal_needles, split_lines, strip_prefix
from .events import errno_name, fill, fill_value

#: Names of the loader and matcher, imported on first use: a check reads its catalogs from
#: the configuration cache, and a probe that only strips log prefixes needs neither.
_LAZY = {"CatalogSet": "matcher", "load_catalogs": "matcher", "Catalog": "schema",
         "Entry": "schema", "load_catalog_file": "schema"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Catalog", "CatalogSet", "Entry", "errno_name", "fill", "fill_value", "iter_lines",
           "literal_needles", "load_catalog_file", "load_catalogs", "split_lines", "strip_prefix"]
