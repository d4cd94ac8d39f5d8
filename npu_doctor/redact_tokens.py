"""Patterns for the redaction kinds that need more than one regex: secrets (credentials in
URLs, secret query parameters, `key = value` secrets, well-known token formats), the names a
text itself reveals (syslog host field, systemd's "Hostname set to", shell prompts, `id`),
and which dotted quads are addresses rather than versions. Used by `npu_doctor.redact`.

Sources of the token formats: GitHub (`ghp_`, `github_pat_`; docs.github.com "About
authentication to GitHub"), Hugging Face (`hf_`; huggingface.co/docs/hub/security-tokens),
GitLab (`glpat-`; docs.gitlab.com "Personal access tokens"), Slack (`xox?-`), AWS access key
ids (`AKIA` + 16; docs.aws.amazon.com IAM "Understanding unique ID prefixes"), OpenAI
(`sk-`).
"""

from __future__ import annotations

from typing import Iterator, Tuple

from .lazyregex import lazy

#: `scheme://user:password@host`: the whole userinfo is a secret (a token is often the user).
URL_USERINFO = lazy(r"(?i)(\b[a-z][a-z0-9+.-]{1,15}://)([^/\s:@\"'<>]+(?::[^/\s@\"'<>]*)?)@")
#: `?token=X` / `&api_key=X` / `;sig=X`: the value of a secret-named query parameter.
_SECRET_NAMES = (r"(?:access[_-]?token|refresh[_-]?token|id[_-]?token|auth[_-]?token|token|"
                 r"api[_-]?key|apikey|access[_-]?key(?:[_-]?id)?|secret(?:[_-]?key)?|"
                 r"client[_-]?secret|password|passwd|pwd|pass|sig|signature|"
                 r"x-amz-signature|x-amz-credential|x-amz-security-token|auth|key)")
URL_QUERY = lazy(r"(?i)([?&;]" + _SECRET_NAMES + r"=)([^&\s#\"'<>]+)")
#: `password: X`, `HF_TOKEN=X`, `Authorization: Bearer X` in logs and configs.
KV_SECRET = lazy(
    r"(?i)(\b(?:[A-Z0-9]+_)*(?:token|api[_-]?key|apikey|secret(?:[_-]?key)?|password|passwd|"
    r"access[_-]?key(?:[_-]?id)?)\b\"?[ \t]*[:=][ \t]*\"?)([^\s\"',;&()]{4,})"
    r"(?=[\s\"',;&]|$)")
BEARER = lazy(r"(?i)(\bauthorization:[ \t]*(?:bearer|basic|token)[ \t]+|\bbearer[ \t]+)"
              r"([A-Za-z0-9._~+/=-]{12,})")
KNOWN_TOKEN = lazy(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|hf_[A-Za-z0-9]{20,}|"
    r"glpat-[A-Za-z0-9_-]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|"
    r"sk-[A-Za-z0-9_-]{20,})\b")
#: (pattern, group holding the secret) in the order they are tried.
SECRET_RES = ((URL_USERINFO, 2), (URL_QUERY, 2), (KV_SECRET, 2), (BEARER, 2),
              (KNOWN_TOKEN, 0))
#: Values a key=value match finds that are not secrets (placeholders, booleans, paths).
NOT_SECRETS = {"none", "null", "true", "false", "yes", "no", "n/a", "unset", "required",
               "optional", "redacted", "<redacted>", "xxx", "xxxx", "****", "********"}

# -- names a text reveals ---------------------------------------------------------------------
#: rsyslog / journalctl short format: `Mar  3 10:02:11 HOST prog[pid]: ...`, or ISO stamps.
SYSLOG_HOST = lazy(
    r"(?m)^(?:[A-Z][a-z]{2}[ \t]+\d{1,2}[ \t]+\d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"
    r"[\d.:+-]*Z?)[ \t]+([A-Za-z0-9][A-Za-z0-9.-]{1,62})[ \t]+[\w./@-]+(?:\[\d+\])?:")
#: systemd: `systemd[1]: Hostname set to <rock5b>.`
SYSTEMD_HOST = lazy(r"Hostname set to <([^>\s]+)>")
#: shell prompts and scp targets: `alice@rock5b:~$`, `alice@rock5b:/opt$`
PROMPT = lazy(r"(?<![\w.@-])([a-z_][a-z0-9_-]{2,31})@([A-Za-z0-9][A-Za-z0-9.-]{1,62})"
              r":(?=[~/])")
#: `id` output and `ls -l`-like owners: `uid=1000(alice)`
ID_USER = lazy(r"\buid=\d+\(([^)\s]+)\)")


def names_in(text: str) -> Iterator[Tuple[str, str]]:
    """("hostname" | "user", name) pairs the text itself reveals."""
    for m in SYSLOG_HOST.finditer(text):
        yield "hostname", m.group(1)
    for m in SYSTEMD_HOST.finditer(text):
        yield "hostname", m.group(1)
    for m in PROMPT.finditer(text):
        yield "user", m.group(1)
        yield "hostname", m.group(2)
    for m in ID_USER.finditer(text):
        yield "user", m.group(1)


def secrets_in(text: str) -> Iterator[str]:
    """Every secret value the patterns find (URL credentials, tokens, passwords)."""
    for rx, g in SECRET_RES:
        for m in rx.finditer(text):
            v = m.group(g)
            if v.lower().strip("\"'") not in NOT_SECRETS and not v.startswith(("$", "%", "{")):
                yield v


# -- dotted quads: address or version ---------------------------------------------------------
#: What just before a dotted quad makes it a version: `version 10.3.0.26`, `v8.6.1.6` is
#: excluded by the quad regex itself, a dpkg-query `name<TAB>version` column.
VERSION_BEFORE = lazy(r"(?i)(?:version|release|revision|\bver\b|firmware|\bfw\b|driver|"
                      r"\bsdk\b|\bcuda\b|tensorrt|cudnn|\bcann\b)\W{0,3}$|\t$|\($")


def version_like(line: str, start: int, end: int) -> bool:
    """Whether the dotted quad at line[start:end] reads as a version (`10.3.0.26-1+cuda12.5`,
    `version 8.6.1.6`, a dpkg `name<TAB>version` value)."""
    if line[end:end + 1] in ("-", "+", "~"):
        return True
    return bool(VERSION_BEFORE.search(line[max(0, start - 24):start]))


#: Words that make the next dotted quad an address only on a line that speaks of no version.
WEAK_BEFORE = lazy(r"(?i)\b(?:from|to|by|at|for)\s+$")
VERSION_WORDS = lazy(r"(?i)version|release|revision|upgrad|downgrad|install|packag|"
                           r"cuda|cudnn|tensorrt|driver|firmware|sdk|\d+\.\d+\.\d+\.\d+[-+~]")

#: A line that starts with an address: web and proxy access logs (`52.14.3.9 - - [...]`).
LEADING_ADDRESS = lazy(r"^\s*(?:\d{1,3}\.){3}\d{1,3}\s+(?:-|\S+)\s")
