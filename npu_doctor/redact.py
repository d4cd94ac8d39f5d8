"""Redaction of personal and machine-identifying values in a capture.

What is replaced (each kind with its own placeholder, numbered in order of first sight, so
the same value gets the same placeholder in every file, command output, log and path):

| kind      | found by                                                           | placeholder |
|-----------|--------------------------------------------------------------------|-------------|
| hostname  | the host's own name (given with `add_hostname`), as a whole token  | `host-1` |
| user      | the invoking user's name (`add_user`), as a whole token            | `user1` |
| home      | the user's home directory (`add_home`), as a path prefix           | `/home/user1` (the user's placeholder), else `/home/redacted1` |
| serial    | `Serial Number: X`, `serial_number": "X"`, `serial=X`, `SN: X`, and whole files named serial, serial_number, product_serial, board_serial, chassis_serial, machine-id, unique_id | `SERIAL-0001` |
| uuid      | 8-4-4-4-12 hex UUIDs anywhere; values of `uuid=`/`UUID=`/`PARTUUID=` | `00000000-0000-4000-8000-000000000001` |
| mac       | six hex pairs joined by `:` or `-` (not all zeros / all ones)      | `02:00:00:00:00:01` |
| ipv4      | a dotted quad on a line that speaks of addresses (inet, addr, ip, host, server, gateway, via, src, dst, nameserver, url, `@`, `://`), with a /prefix or :port, or in 10/8, 192.168/16, 172.16/12, 169.254/16, 100.64/10; never 127.x, 0.0.0.0 or masks | `192.0.2.1` (RFC 5737) |
| ipv6      | full or `::`-compressed IPv6 (not ::1): global, ULA fc00::/7, link-local fe80::/10 | `2001:db8::1` (RFC 3849) |
| secret    | URL credentials (`https://user:token@`), secret query parameters (`?token=`, `&sig=`), `PASSWORD=`/`api_key:` values, `Authorization: Bearer`, well-known token formats (`ghp_`, `hf_`, `glpat-`, `AKIA`...) | `REDACTED-1` |

Names are also learned from what the text itself says: a syslog line's host field, systemd's
"Hostname set to <X>", a shell prompt `user@host:~`, `id`'s `uid=1000(user)`, `/home/NAME`.
A public IPv4 address is replaced where the line speaks of addresses (or begins with it, as
an access log does) unless the quad reads as a version (`10.3.0.26-1`, `version 8.6.1.6`, a
dpkg `name<TAB>version` column): kernel releases, PCI addresses and timestamps never match.

Names of 8+ characters with a digit or hyphen are replaced wherever they are not part of a
longer alphanumeric word (`BUILD_ID=rk-lab42-2024`); others only as whole tokens (below).
A dotted quad that is not in an address context is left alone on purpose: TensorRT
`8.6.1.6` and cuDNN `8.9.7.29` look like IPv4 addresses, and a version must survive a capture.
Names shorter than 3 characters or that are everyday path and log words (`vm`, `sys`,
`data`, `ubuntu`) are not replaced at all. For the same reason names are replaced only as
whole tokens (`(?<![\\w.-])NAME(?![\\w-])`),
never inside `linux-image-NAME` or `NAME-tools`, and not in os-release or device-tree files,
where a default hostname such as `raspberrypi` is the board's compatible string.

Use: `scan(text, path)` over everything first (learns values), then `apply(text, path)`;
`value(obj)` redacts a facts tree the same way (for comparing a live run with its capture).
"""

from __future__ import annotations

import functools
import posixpath
import re
from typing import Any, Dict, List, Optional, Tuple

from .lazyregex import lazy
from .redact_tokens import LEADING_ADDRESS, SECRET_RES, VERSION_WORDS, WEAK_BEFORE, names_in, secrets_in, version_like

KINDS = ("hostname", "user", "home", "serial", "uuid", "mac", "ipv4", "ipv6", "secret")
#: How a summary names each kind: (one, many), for `1 hostname`, `2 MAC addresses`.
KIND_NOUNS = {"hostname": ("hostname", "hostnames"), "user": ("user name", "user names"),
              "home": ("home directory", "home directories"),
              "serial": ("serial number", "serial numbers"), "uuid": ("UUID", "UUIDs"),
              "mac": ("MAC address", "MAC addresses"), "ipv4": ("IPv4 address", "IPv4 addresses"),
              "ipv6": ("IPv6 address", "IPv6 addresses"), "secret": ("secret", "secrets")}

#: Names that identify nothing, or that are words of every filesystem and log (replacing
#: a host called `vm` or a user called `sys` would rewrite /proc/sys/vm): never replaced.
GENERIC_NAMES = {"localhost", "localhost.localdomain", "root", "user", "admin", "nobody", "",
                 "sys", "dev", "proc", "bin", "sbin", "lib", "lib64", "usr", "etc", "var", "tmp",
                 "opt", "run", "boot", "home", "mnt", "media", "srv", "data", "test", "build",
                 "linux", "kernel", "driver", "module", "device", "npu", "gpu", "cpu", "cuda",
                 "debug", "power", "class", "bus", "pci", "usb", "net", "log", "logs", "share",
                 "local", "host", "node", "server", "default", "docker", "ubuntu", "debian",
                 "fedora", "centos", "rhel", "rocky", "almalinux", "alpine", "arch", "armbian",
                 "raspbian", "openeuler", "kylin", "euleros", "opensuse", "git", "kernel.org"}
#: Shorter names are too likely to occur as ordinary tokens.
MIN_NAME_LEN = 3
#: Serial-number values that are not serial numbers.
NON_VALUES = {"n/a", "na", "none", "unknown", "not specified", "not available", "default string",
              "to be filled by o.e.m.", "0", "00000000", "0x0", "null", "-", "[n/a]",
              "not supported", "unsupported", "(null)", "ffffffff"}
#: Files whose whole content is a serial number or a machine id (by basename).
SERIAL_FILES = {"serial", "serial_number", "serial-number", "product_serial", "board_serial",
                "chassis_serial", "machine-id", "unique_id", "product_uuid", "serial_num"}
#: Paths where tokens are vendor identifiers, never the host's or user's name.
#: (os-release is not among them: a lab image's VARIANT or BUILD_ID can carry the host's name.)
NAME_SAFE_PREFIXES = ("/proc/device-tree/", "/sys/firmware/devicetree/", "/etc/debian_version")

_SERIAL_KEY = (r"\b(?:serial(?:[ _-]?(?:number|no|num))?|product[ _-]?serial|board[ _-]?serial|"
               r"board[ _-]?sn|chip[ _-]?sn|s/n|sn)\b")
# `Serial Number: X` / `"serial_number": "X",`: the value ends the line (so the kernel's
# "Serial: 8250/16550 driver, 4 ports" is not a serial number) ...
_SERIAL_COLON = lazy(r"(?im)(" + _SERIAL_KEY + r"\"?[ \t]*:[ \t]*\"?)([^\s\",;|]+)"
                     r"(?=\"?[ \t]*,?[ \t]*$)")
# ... `serial=X` (kernel command line, key=value lists): the value ends at a blank.
_SERIAL_EQ = lazy(r"(?i)(" + _SERIAL_KEY + r"[ \t]*=[ \t]*\"?)([^\s\",;|]+)")
_SERIAL_RES = (_SERIAL_COLON, _SERIAL_EQ)
_HOME_RE = lazy(r"(?<![\w.-])(?:/var)?/home/([A-Za-z0-9._-]+)")
_UUID_KV = lazy(r"(?i)(\b(?:uuid|partuuid|fs[_-]?uuid)\s*[:=]\s*\"?)([^\s\",;)]+)")
_UUID = lazy(r"(?<![0-9A-Fa-f])[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-"
             r"[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}(?![0-9A-Fa-f])")
_MAC = lazy(r"(?<![0-9A-Fa-f:-])(?:[0-9A-Fa-f]{2}([:-]))(?:[0-9A-Fa-f]{2}\1){4}"
            r"[0-9A-Fa-f]{2}(?![0-9A-Fa-f:-])")
_IPV4 = lazy(r"(?<![\w.])((?:\d{1,3}\.){3}\d{1,3})(/\d{1,2}|:\d{1,5})?(?![\w]|\.\d)")
_IP_CONTEXT = lazy(
    r"(?i)\b(?:inet6?|addr|address|ip|ipv4|ipaddr|host|hostname|server|gateway|gw|via|src|"
    r"dst|peer|nameserver|client|dhcp\w*|lease|route|listen\w*|connect\w*|remote|proxy|url|"
    r"https?|ssh|ping)\b|@|://")
_IPV6 = lazy(
    r"(?<![0-9A-Fa-f:\w.])("
    r"(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}"
    r"|(?:[0-9A-Fa-f]{1,4}:){1,6}:(?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,5})?"
    r"|::[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,6}"
    r")(/\d{1,3})?(?![0-9A-Fa-f:\w])")


def _private_v4(ip: str) -> bool:
    a, b = (int(x) for x in ip.split(".")[:2])
    # RFC 1918 172.16/12 and 192.168/16, link-local 169.254/16 (10/8 and CGNAT: _weak_private_v4)
    return (a == 192 and b == 168) or (a == 172 and 16 <= b <= 31) or (a == 169 and b == 254)


#: Lines where a dotted quad starting 10. or 100. is likely a version (TensorRT 10.3.0.26 in
#: dpkg-query's `name<TAB>version`, "version 10.1.0.5"), not an address.
_VERSIONISH = lazy(r"version|release|revision|\bv\d|\t", re.IGNORECASE)


def _weak_private_v4(m: "re.Match", line: str) -> bool:
    """10/8 (RFC 1918) and CGNAT 100.64/10 (RFC 6598): an address unless it reads as a
    version (followed by -, +, ~ or on a line that speaks of versions)."""
    a, b = (int(x) for x in m.group(1).split(".")[:2])
    if not (a == 10 or (a == 100 and 64 <= b <= 127)):
        return False
    after = line[m.end():m.end() + 1]
    return after not in ("-", "+", "~") and not _VERSIONISH.search(line)


class Redactor:
    """A consistent value -> placeholder mapping for one capture. `enabled=False` passes
    everything through (capture --no-redact)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.maps: Dict[str, Dict[str, str]] = {k: {} for k in KINDS}
        self._literal_re: Optional[re.Pattern] = None
        self._homes: List[Tuple[str, str]] = []
        self._placeholders: set = set()

    # -- learning --------------------------------------------------------------------------
    def _ph(self, kind: str, value: str) -> str:
        m = self.maps[kind]
        if value in self._placeholders:
            return value  # already redacted: applying twice changes nothing
        if value not in m:
            n = len(m) + 1
            m[value] = {
                "hostname": f"host-{n}", "user": f"user{n}", "home": f"/home/redacted{n}",
                "serial": f"SERIAL-{n:04d}", "uuid": f"00000000-0000-4000-8000-{n:012d}",
                "mac": "02:00:00:00:{:02x}:{:02x}".format(n // 256 % 256, n % 256),
                "ipv4": f"192.0.2.{n}" if n <= 254 else f"198.51.100.{(n - 255) % 254 + 1}",
                "ipv6": f"2001:db8::{n:x}", "secret": f"REDACTED-{n}",
            }[kind]
            self._placeholders.add(m[value])
            self._literal_re = None
        return m[value]

    def add_hostname(self, name: Optional[str]) -> None:
        """The host's name (and its short form when given a FQDN)."""
        name = (name or "").strip().rstrip(".")
        if not self.enabled or name.lower() in GENERIC_NAMES or len(name) < MIN_NAME_LEN \
                or re.fullmatch(r"[\d.:]+", name):
            return
        self._ph("hostname", name)
        short = name.split(".")[0]
        if short != name and short.lower() not in GENERIC_NAMES and len(short) >= MIN_NAME_LEN:
            self._ph("hostname", short)

    def add_user(self, name: Optional[str]) -> None:
        name = (name or "").strip()
        if self.enabled and name.lower() not in GENERIC_NAMES and len(name) >= MIN_NAME_LEN:
            self._ph("user", name)

    def add_home(self, path: Optional[str]) -> None:
        path = posixpath.normpath(path or "/")
        if not self.enabled or path in ("/", "/root", "/home") or not path.startswith("/"):
            return
        user = posixpath.basename(path)
        if path not in self.maps["home"] and user in self.maps["user"]:
            # /home/alice -> /home/user1 when alice is user1: one name, one placeholder
            self.maps["home"][path] = "/home/" + self.maps["user"][user]
            self._placeholders.add(self.maps["home"][path])
        else:
            self._ph("home", path)
        self._homes = sorted(self.maps["home"].items(), key=lambda t: -len(t[0]))

    def _serial(self, value: str) -> Optional[str]:
        v = value.strip().strip("\"'")
        if not v or v.lower() in NON_VALUES or not re.search(r"[0-9A-Za-z]", v):
            return None
        if not re.search(r"\d", v) and len(v) < 6:
            return None
        return self._ph("serial", v)

    def scan(self, text: str, path: Optional[str] = None) -> None:
        """Learn the sensitive values of one text (file content, command output, log)."""
        if not self.enabled or not text:
            return
        if path and posixpath.basename(path) in SERIAL_FILES:
            self._serial(text.strip("\x00").strip())
        for kind, name in names_in(text):
            (self.add_hostname if kind == "hostname" else self.add_user)(name)
        for secret in secrets_in(text):
            self._ph("secret", secret)
        for m in _HOME_RE.finditer(text):
            self.add_user(m.group(1))
            if m.group(1) in self.maps["user"]:
                self.add_home("/home/" + m.group(1))
        for rx in _SERIAL_RES:
            for m in rx.finditer(text):
                self._serial(m.group(2))
        for m in _UUID_KV.finditer(text):
            v = m.group(2)
            # a standard UUID inside the value (GPU-xxxxxxxx-...) is left to the UUID pattern,
            # so the value redacts the same with or without its key
            if len(v) >= 4 and re.search(r"\d", v) and not _UUID.search(v):
                self._ph("uuid", v)
        for m in _UUID.finditer(text):
            self._ph("uuid", m.group(0).lower())
        for m in _MAC.finditer(text):
            mac = m.group(0).lower().replace("-", ":")
            if mac not in ("00:00:00:00:00:00", "ff:ff:ff:ff:ff:ff"):
                self._ph("mac", mac)
        for line in text.splitlines():
            if "." in line:
                for m in _IPV4.finditer(line):
                    if self._is_address(m, line):
                        self._ph("ipv4", m.group(1))
            if "::" in line or line.count(":") >= 7:
                for m in _IPV6.finditer(line):
                    if self._is_v6(m.group(1)):
                        self._ph("ipv6", m.group(1).lower())

    @staticmethod
    def _is_address(m: "re.Match", line: str) -> bool:
        ip = m.group(1)
        octets = [int(x) for x in ip.split(".")]
        if any(o > 255 for o in octets) or octets[0] in (0, 127, 255) or ip.startswith("255."):
            return False
        if m.group(2) or _private_v4(ip) or _weak_private_v4(m, line):
            return True
        if version_like(line, m.start(1), m.end(1)):
            return False
        if m.start() == 0 or not line[:m.start()].strip():
            if LEADING_ADDRESS.match(line):
                return True
        if _IP_CONTEXT.search(line):
            return True
        # `connection from 52.14.3.9`, but not `cudnn 8.9.7.29 to 9.1.0.70`
        return bool(WEAK_BEFORE.search(line[max(0, m.start() - 12):m.start()])) and \
            not VERSION_WORDS.search(line)

    @staticmethod
    def _is_v6(v: str) -> bool:
        return v not in ("::1", "::") and len(v.replace(":", "")) >= 3

    # -- replacing ---------------------------------------------------------------------------
    def _literals(self) -> Optional[re.Pattern]:
        if self._literal_re is None:
            lits = [v for k in ("hostname", "user", "serial", "secret") for v in self.maps[k]
                    if k not in ("serial", "secret") or len(v) >= 6]
            lits += [v for v in self.maps["uuid"] if not _UUID.fullmatch(v)]
            if not lits:
                return None

            def alt(vs: List[str]) -> str:
                return "|".join(re.escape(v) for v in sorted(set(vs), key=lambda s: (-len(s), s)))

            # A distinctive name (8+ characters with a digit or hyphen: `rk-bench-lab42`) is
            # replaced inside `BUILD_ID=rk-bench-lab42-2024` or `app-rk-bench-lab42.log`
            # too; a plain word (`raspberrypi`) only as a whole token, so `linux-image-NAME`
            # and `NAME-tools` stay readable.
            loose = [v for v in lits if len(v) >= 8 and re.search(r"[\d-]", v)]
            strict = [v for v in lits if v not in loose]
            parts = []
            if strict:
                parts.append(r"(?<![\w.-])(?:" + alt(strict) + r")(?![\w-])")
            if loose:
                parts.append(r"(?<![A-Za-z0-9])(?:" + alt(loose) + r")(?![A-Za-z0-9])")
            self._literal_re = re.compile("(" + "|".join(parts) + ")")
        return self._literal_re

    def _literal_ph(self, value: str) -> str:
        for kind in ("secret", "serial", "hostname", "user", "uuid"):
            if value in self.maps[kind]:
                return self.maps[kind][value]
        return value

    def apply(self, text: str, path: Optional[str] = None) -> str:
        """Text with every learned (and every pattern-found) value replaced."""
        if not self.enabled or not text:
            return text
        self.scan(text, path)
        if path and posixpath.basename(path) in SERIAL_FILES:
            v = text.strip("\x00").strip()
            ph = self.maps["serial"].get(v.strip("\"'"))
            if ph:
                text = text.replace(v, ph)
        secrets = self.maps["secret"]
        for rx, g in SECRET_RES:
            text = rx.sub(functools.partial(_sub_group, g=g, mapping=secrets), text)
        for home, ph in self._homes:
            text = re.sub(re.escape(home) + r"(?=/|\b|$)", ph, text)
        for rx in _SERIAL_RES:
            text = rx.sub(lambda m: m.group(1) + (
                self.maps["serial"].get(m.group(2).strip("\"'"), m.group(2))), text)
        text = _UUID_KV.sub(lambda m: m.group(1) + self.maps["uuid"].get(m.group(2), m.group(2)),
                            text)
        text = _UUID.sub(lambda m: self.maps["uuid"].get(m.group(0).lower(), m.group(0)), text)
        text = _MAC.sub(lambda m: self.maps["mac"].get(m.group(0).lower().replace("-", ":"),
                                                       m.group(0)), text)
        if self.maps["ipv4"]:
            text = _IPV4.sub(lambda m: self.maps["ipv4"].get(m.group(1), m.group(1)) +
                             (m.group(2) or ""), text)
        if self.maps["ipv6"]:
            text = _IPV6.sub(lambda m: self.maps["ipv6"].get(m.group(1).lower(), m.group(1)) +
                             (m.group(2) or ""), text)
        lit = self._literals()
        if lit is not None and not (path and path.startswith(NAME_SAFE_PREFIXES)):
            text = lit.sub(lambda m: self._literal_ph(m.group(1)), text)
        elif lit is not None and self.maps["serial"]:
            # in name-safe files still replace serials (device-tree serial-number)
            ser = [v for v in self.maps["serial"] if len(v) >= 6]
            if ser:
                rx = re.compile(r"(?<![\w.-])(" + "|".join(re.escape(v) for v in ser) + r")(?![\w-])")
                text = rx.sub(lambda m: self.maps["serial"][m.group(1)], text)
        return text

    def apply_path(self, path: str) -> str:
        """A host path with home directories, names, serials and ids replaced."""
        if not self.enabled:
            return path
        return self.apply(path)

    def value(self, obj: Any, path: Optional[str] = None) -> Any:
        """A facts tree (dicts, lists, scalars) with every string redacted like the capture."""
        if not self.enabled:
            return obj
        if isinstance(obj, str):
            return self.apply(obj, path)
        if isinstance(obj, dict):
            return {self.value(k) if isinstance(k, str) else k: self.value(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.value(v) for v in obj]
        return obj

    def summary(self) -> Dict[str, int]:
        """How many distinct values of each kind were replaced."""
        return {k: len(v) for k, v in self.maps.items() if v}

    def summary_text(self) -> str:
        """`1 hostname, 2 MAC addresses` (kinds in KINDS order), or `nothing found`."""
        counts = self.summary()
        parts = []
        for k in KINDS:
            if counts.get(k):
                one, many = KIND_NOUNS[k]
                parts.append(f"{counts[k]} {one if counts[k] == 1 else many}")
        return ", ".join(parts) or "nothing found"


def _sub_group(m: "re.Match", g: int, mapping: Dict[str, str]) -> str:
    """The match with group g replaced by its placeholder (when one was learned)."""
    v = m.group(g)
    if v not in mapping:
        return m.group(0)
    s, e = m.start(g) - m.start(), m.end(g) - m.start()
    return m.group(0)[:s] + mapping[v] + m.group(0)[e:]


def is_text(data: bytes) -> bool:
    """Whether bytes are text we may redact (UTF-8, no NUL): binaries are never rewritten."""
    if b"\x00" in data[:65536]:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
