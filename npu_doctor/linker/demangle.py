"""The qualified name of an Itanium C++ ABI mangled symbol, enough to say whose it is.

An "undefined symbol: _ZNSt15__exception_ptr13exception_ptr9_M_addrefEv" names the library that
should define it only through its namespace (std:: is libstdc++, c10:: torch, ov:: OpenVINO,
hailort:: HailoRT, nvinfer1:: TensorRT). This reads the name part of the mangling (nested names,
the std:: abbreviations, constructors/destructors, the typeinfo/vtable specials) and stops at
what it does not need (template arguments, parameters, operators, substitutions): the result is
the qualified name without its signature, e.g. `std::__exception_ptr::exception_ptr::_M_addref`.
Source: the Itanium C++ ABI, section 5.1 "External Names"
(https://itanium-cxx-abi.github.io/cxx-abi/abi.html#mangling). No c++filt is needed, so a
snapshot replays the same anywhere.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

_SPECIAL = {"TI": "typeinfo for ", "TV": "vtable for ", "TS": "typeinfo name for ", "TT": "VTT for "}
_STD_ABBREV = {"St": "std", "Sa": "std::allocator", "Sb": "std::basic_string", "Ss": "std::string",
               "Si": "std::istream", "So": "std::ostream", "Sd": "std::iostream"}
_SOURCE_NAME = re.compile(r"(\d+)")


def _source_name(s: str, i: int) -> Tuple[Optional[str], int]:
    m = _SOURCE_NAME.match(s, i)
    if not m:
        return None, i
    n, j = int(m.group(1)), m.end()
    if n == 0 or j + n > len(s):
        return None, i
    return s[j:j + n], j + n


def _components(s: str, i: int, nested: bool) -> List[str]:
    """Name components from s[i:], up to the end of a nested name or the first part not read."""
    parts: List[str] = []
    while i < len(s):
        two = s[i:i + 2]
        if nested and s[i] == "E":
            break
        if two in _STD_ABBREV and (two != "St" or not parts):
            parts.append(_STD_ABBREV[two])
            i += 2
        elif s[i].isdigit():
            name, i = _source_name(s, i)
            if name is None:
                break
            parts.append(name)
        elif two in ("C1", "C2", "C3", "C4", "C5") and parts:
            parts.append(parts[-1].rsplit("::", 1)[-1])
            i += 2
        elif two in ("D0", "D1", "D2", "D4", "D5") and parts:
            parts.append("~" + parts[-1].rsplit("::", 1)[-1])
            i += 2
        else:
            break  # template arguments, substitutions, operators: the name so far is enough
        if not nested and parts[-1] != "std":  # _ZSt<name>: std:: and one name
            break
    return parts


def demangle_name(symbol: str) -> Optional[str]:
    """`a::b::c` for a mangled `_Z...` symbol (without its parameters), None when it is none."""
    if not symbol.startswith("_Z"):
        return None
    s, i, prefix = symbol, 2, ""
    if s[i:i + 2] in _SPECIAL:
        prefix, i = _SPECIAL[s[i:i + 2]], i + 2
    nested = s[i:i + 1] == "N"
    if nested:
        i += 1
        while s[i:i + 1] in ("K", "V", "r", "R", "O"):
            i += 1
    parts = _components(s, i, nested)
    if not parts:
        return None
    return prefix + "::".join(parts)


def symbol_namespace(symbol: str) -> Optional[str]:
    """The outermost namespace of a mangled symbol (`std`, `c10`, `hailort`), None for a C name
    or a name at global scope."""
    name = demangle_name(symbol)
    if not name:
        return None
    name = name.split(" for ", 1)[-1]
    return name.split("::", 1)[0] if "::" in name else None


def symbol_groups(symbol: str) -> Dict[str, str]:
    """What a catalog line's `symbol` group adds: `symbol_name` (the qualified name, or the
    symbol itself for a C name) and, for a namespaced C++ name, `symbol_namespace`."""
    out = {"symbol_name": demangle_name(symbol) or symbol}
    ns = symbol_namespace(symbol)
    if ns:
        out["symbol_namespace"] = ns
    return out
