"""Secrets taken out of captured text before anything is stored.

A capture (a prompt, an answer, a failed command) is to pass through
:func:`redact` before it is written anywhere (the spool, the store, the log). Text
inside ``<private>…</private>`` goes entirely; API keys and tokens of the
common providers, private key blocks, passwords in URLs and connection
strings, and the values of credential-like names are each
replaced by a marker naming their kind, such as ``[redacted:github-token]``.
docs/hooks.md lists exactly what is redacted and what is kept.

The patterns are our own: detect-secrets, the library that does this job,
scans line by line for findings rather than spans (a private key block is
one line to it), brings pyyaml and requests, and reads its plugins from
process-wide settings; a capture needs spans, in one pure call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["Redaction", "redact"]


@dataclass(frozen=True)
class Redaction:
    """Text made safe to keep.

    Attributes:
        text: the text with each secret replaced by ``[redacted:<kind>]`` and
            each private section by ``[private]``.
        kinds: the kind of each replacement, in the order they appear in
            ``text`` (``"private"`` for a private section).
    """

    text: str
    kinds: tuple[str, ...]


PRIVATE_MARKER = "[private]"

_PRIVATE = re.compile(r"<private>.*?(?:</private>|\Z)", re.IGNORECASE | re.DOTALL)

# A token's characters: a token with a common prefix (sk-, hf_, npm_) must not
# be the tail of a longer word (task-2024-...); one with a prefix no word has
# (ghp_, glpat-) is taken even glued to one. The check is made on each find,
# not as a look-behind, so that the patterns start with their literal prefix,
# which the regex engine searches for quickly.
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_T = r"A-Za-z0-9_\-"
_END = rf"(?![{_T}])"


def _mixed(value: str) -> bool:
    """Whether a token looks drawn at random, not spelled: digits or many capitals."""
    body = value.split("_", 1)[-1] if value.startswith("hf_") else value
    capitals_and_digits = sum(c.isupper() or c.isdigit() for c in body)
    return any(c.isdigit() for c in body) or capitals_and_digits * 4 >= len(body)


def _has_digit(value: str) -> bool:
    return any(c.isdigit() for c in value)


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    #: The rule runs only on a text holding one of these (``lower`` ones lower-cased).
    needles: tuple[str, ...]
    group: str | int = 0
    accept: Callable[[str], bool] | None = None
    lower: bool = False
    bounded: bool = True


def _rule(
    kind: str,
    pattern: str,
    needles: tuple[str, ...],
    group: str | int = 0,
    accept: Callable[[str], bool] | None = None,
    *,
    flags: int = 0,
    lower: bool = False,
    bounded: bool = True,
) -> _Rule:
    return _Rule(kind, re.compile(pattern, flags), needles, group, accept, lower, bounded)


# The names a credential goes by, in a key whose parts are joined by "_".
_CREDENTIAL_NAME = re.compile(
    r"secret|token(?!iz|s(?![a-z]))|passw(?:or)?d|(?<![a-z])pass(?![a-z])|(?<![a-z])pwd(?![a-z])"
    r"|api_?key|private_?key|credential|(?<![a-z])auth(?!or)|access_?key"
)
_PASSWORD_NAME = re.compile(r"pass|pwd")
# A name that ends so is about a credential, not one: a URL, a file, a length.
_NEUTRAL_LAST_PART = frozenset(
    [
        "count",
        "len",
        "length",
        "size",
        "limit",
        "max",
        "min",
        "type",
        "types",
        "name",
        "names",
        "url",
        "uri",
        "endpoint",
        "file",
        "path",
        "dir",
        "env",
        "var",
        "field",
        "header",
        "prefix",
        "suffix",
        "expiry",
        "expires",
        "ttl",
        "timeout",
        "enabled",
        "disabled",
        "required",
        "id",
        "ids",
        "hint",
        "policy",
        "mode",
        "format",
        "encoding",
        "algorithm",
        "method",
        "scheme",
        "provider",
        "version",
        "rotation",
        "reset",
        "label",
        "description",
        "placeholder",
        "message",
        "help",
        "domain",
        "host",
        "port",
        "user",
        "username",
        "email",
        "issuer",
        "audience",
        "scope",
        "scopes",
    ]
)
_PLACEHOLDER_WORDS = frozenset(
    [
        "none",
        "null",
        "nil",
        "true",
        "false",
        "undefined",
        "str",
        "string",
        "int",
        "bytes",
        "bool",
        "boolean",
        "any",
        "number",
        "optional",
        "secretstr",
        "await",
        "new",
        "changeme",
        "change_me",
        "password",
        "passwd",
        "secret",
        "token",
        "example",
        "dummy",
        "placeholder",
        "redacted",
        "todo",
        "tbd",
        "fixme",
        "empty",
        "required",
        "optional",
        "basic",
        "bearer",
        "digest",
        "oauth",
        "oauth2",
        "jwt",
        "session",
        "apikey",
        "api_key",
    ]
)
_PLACEHOLDER = re.compile(
    r"""
    [xX*.\-_#•]* | \$\{.* | \$\(.* | \$[A-Za-z_]\w* | \$\d+ | %[A-Za-z_]\w*%
    | %s | \? | :[A-Za-z_]\w* | \{\{.*\}\} | \{[A-Za-z_][\w.]*\} | <[^<>]*>
    | \[redacted:[a-z0-9-]+\] | \[private\]
    | (?i:your[-_].*|.*[-_]here|x{3,}.*|.*x{6,})
    """,
    re.VERBOSE,
)
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _key_parts(key: str) -> str:
    return _CAMEL.sub("_", key.lstrip("-")).lower().replace("-", "_").replace(".", "_")


def _is_credential_name(key: str) -> bool:
    name = _key_parts(key)
    if name.rsplit("_", 1)[-1] in _NEUTRAL_LAST_PART:
        return False
    if _CREDENTIAL_NAME.search(name):
        return True
    # Upper-case environment names ending in KEY or SALT hold keys (SENTRY_KEY).
    bare = key.lstrip("-")
    return bare.isupper() and re.search(r"(?:^|_)(?:\w*KEY|SALT)$", bare) is not None


def _is_placeholder(value: str, key: str = "", quoted: bool = True) -> bool:
    """Whether a credential-like name's value is no secret: empty, a stand-in or code."""
    if len(value) < 4 or value.lower() in _PLACEHOLDER_WORDS:
        return True
    if _PLACEHOLDER.fullmatch(value):
        return True
    if value.isdigit() and len(value) < 8:
        return True
    if quoted:
        return False
    # Unquoted, a value may be code: a call, an index, an attribute, a variable.
    if "(" in value or "[" in value or _DOTTED.fullmatch(value):
        return True
    if _IDENTIFIER.fullmatch(value):
        name = _key_parts(value)
        if name == _key_parts(key) or ("_" in name and _CREDENTIAL_NAME.search(name)):
            return True
    return False


_ASSIGNMENT = re.compile(
    r"""
    (?<![\w.\-])
    (?:
        (?P<key>--[A-Za-z][\w\-]{0,63})(?:[ \t]*=[ \t]*|[ \t]+)
        | (?P<q>["']?)(?P<name>[A-Za-z_][\w.\-]{0,63})(?P=q)
          [ \t]*(?::=|=>|=(?!=)|:(?![:/]))[ \t]*
    )
    (?:
        "(?P<dq>[^"\\\n]*(?:\\.[^"\\\n]*)*)"
        | '(?P<sq>[^'\\\n]*(?:\\.[^'\\\n]*)*)'
        | (?P<bq>\{[^{}\s]*\})
        | (?P<raw>[^\s"'`,;&]+)
    )
    """,
    re.VERBOSE,
)


# Where a credential-like assignment may be: a credential word, the rest of
# its key, and something like a separator. The assignment pattern then runs
# from the key's start, so it is not tried at every word of the text.
_CREDENTIAL_WORD = re.compile(
    r"(?:secret|token|pass|pwd|auth|key|credential)[\w.\-]*[\"']?[ \t]*[:= \t]"
)
_CREDENTIAL_WORD_ANY_CASE = re.compile(_CREDENTIAL_WORD.pattern, re.IGNORECASE)
_CLOSERS = {")": "(", "]": "[", "}": "{"}


def _key_start(text: str, at: int) -> int:
    start = at
    while start > 0 and at - start < 64 and (text[start - 1].isalnum() or text[start - 1] in "_.-"):
        start -= 1
    return start - 1 if start > 0 and text[start - 1] in "\"'" else start


def _assignments(text: str, lowered: str) -> Iterator[tuple[int, int, str]]:
    if len(lowered) == len(text):
        hits = _CREDENTIAL_WORD.finditer(lowered)
    else:  # lower-casing moved the offsets; search the text itself
        hits = _CREDENTIAL_WORD_ANY_CASE.finditer(text)
    done = -1
    for hit in hits:
        start = _key_start(text, hit.start())
        if start <= done:
            continue
        m = _ASSIGNMENT.match(text, start)
        if m is None:
            continue
        done = m.end()
        key = m.group("key") or m.group("name")
        if not _is_credential_name(key):
            continue
        found = _value(m, key)
        if found is not None:
            yield found


def _value(m: re.Match[str], key: str) -> tuple[int, int, str] | None:
    """The span of a credential-like name's value, unless it is no secret."""
    for group in ("dq", "sq", "bq", "raw"):
        value = m.group(group)
        if value is None:
            continue
        start, end = m.span(group)
        if group == "bq":
            if not m.string[m.start() : start].rstrip().endswith("="):
                return None
            value = value[1:-1]
        if group == "raw":
            # A closing bracket whose opening one is not in the value ends the code around it.
            while value and value[-1] in _CLOSERS and _CLOSERS[value[-1]] not in value:
                value, end = value[:-1], end - 1
            if _key_parts(key).endswith("pwd") and value[:1] in ("/", "~"):
                return None  # the shell's working directory
        if _is_placeholder(value, key, quoted=group != "raw"):
            return None
        kind = "password" if _PASSWORD_NAME.search(_key_parts(key)) else "credential"
        return start, end, kind
    return None


_RULES: tuple[_Rule, ...] = (
    _rule(
        "private-key",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
        # Unclosed (a key cut short): its armour headers and base64 lines.
        r"|(?:(?:[ \t]*\r?\n[ \t]*)+(?:[A-Za-z0-9+/=]{8,}|[A-Za-z][\w-]*:[^\n]*))*)",
        ("-----BEGIN",),
        flags=re.DOTALL,
        bounded=False,
    ),
    _rule("anthropic-api-key", rf"sk-ant-[A-Za-z0-9_\-]{{20,}}{_END}", ("sk-ant-",), bounded=False),
    _rule(
        "openai-api-key",
        rf"sk-(?:proj-|svcacct-|admin-)?[{_T}]{{20,}}{_END}",
        ("sk-",),
        accept=_mixed,
    ),
    _rule(
        "github-token",
        r"(?:gh[pousr]_[A-Za-z0-9]{36,}(?![A-Za-z0-9])|github_pat_[A-Za-z0-9_]{22,}(?![A-Za-z0-9_]))",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        bounded=False,
    ),
    _rule("gitlab-token", rf"glpat-[A-Za-z0-9_\-]{{20,}}{_END}", ("glpat-",), bounded=False),
    _rule("aws-access-key", r"(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])", ("AKIA", "ASIA")),
    _rule(
        "aws-secret-key",
        r"(?i:aws_?secret_?access_?key|secret_?access_?key|aws_?secret_?key)[\"']?"
        r"(?:[ \t]*[:=][ \t]*|[ \t]+)[\"']?(?P<v>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
        ("secret",),
        "v",
        lower=True,
        bounded=False,
    ),
    _rule("google-api-key", rf"AIza[0-9A-Za-z_\-]{{35}}{_END}", ("AIza",), bounded=False),
    _rule(
        "slack-token",
        r"(?:xox[baprs]-|xapp-\d-)[A-Za-z0-9\-]{10,}(?![A-Za-z0-9\-])",
        ("xox", "xapp-"),
        bounded=False,
    ),
    _rule(
        "slack-webhook",
        r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_\-]{20,}",
        ("hooks.slack.com",),
    ),
    _rule(
        "stripe-key",
        r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}(?![A-Za-z0-9])",
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_"),
        bounded=False,
    ),
    _rule("sendgrid-key", rf"SG\.[A-Za-z0-9_\-]{{16,32}}\.[A-Za-z0-9_\-]{{16,64}}{_END}", ("SG.",)),
    _rule(
        "twilio-key",
        r"(?:AC|SK)[0-9a-f]{32}(?::[0-9a-f]{32})?(?![A-Za-z0-9])",
        ("AC", "SK"),
    ),
    _rule("npm-token", r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", ("npm_",)),
    _rule("pypi-token", rf"pypi-[A-Za-z0-9_\-]{{40,}}{_END}", ("pypi-",)),
    _rule("huggingface-token", r"hf_[A-Za-z0-9]{30,}(?![A-Za-z0-9])", ("hf_",), accept=_mixed),
    _rule(
        "jwt",
        rf"eyJ[A-Za-z0-9_\-]{{8,}}\.eyJ[A-Za-z0-9_\-]{{8,}}\.[A-Za-z0-9_\-]*{_END}",
        ("eyJ",),
        bounded=False,
    ),
    _rule(
        "authorization",
        r"(?i:(?<![\w-])(?:proxy-)?authorization)[\"']?[ \t]*[:=][ \t]*[\"'`]?"
        r"(?:(?i:bearer|basic|token|bot|apikey|digest)[ \t]+)?(?P<v>[^\s\"'`,;]+)",
        ("authorization",),
        "v",
        lambda v: not _is_placeholder(v),
        lower=True,
        bounded=False,
    ),
    _rule(
        "authorization",
        r"Bearer[ \t]+(?P<v>[A-Za-z0-9._~+/=\-]{16,})",
        ("Bearer",),
        "v",
        _has_digit,
        bounded=False,
    ),
    _rule(
        "url-password",
        r"://(?<=[A-Za-z0-9+.\-]://)[^\s:/?#@\[\]\"'<>]*:(?P<v>[^\s/?#@\"'<>]+)@",
        ("://",),
        "v",
        lambda v: not _is_placeholder(v),
        bounded=False,
    ),
)
# Where two finds start together, the rule listed first names the kind.
_ASSIGNMENT_ORDER = len(_RULES)


def _finds(text: str) -> Iterator[tuple[int, int, int, str]]:
    lowered = text.lower()
    for order, rule in enumerate(_RULES):
        haystack = lowered if rule.lower else text
        if not any(needle in haystack for needle in rule.needles):
            continue
        for m in rule.pattern.finditer(text):
            start = m.start()
            if rule.bounded and start and text[start - 1] in _TOKEN_CHARS:
                continue
            if rule.accept is None or rule.accept(m.group(rule.group)):
                yield m.start(rule.group), m.end(rule.group), order, rule.kind
    for start, end, kind in _assignments(text, lowered):
        yield start, end, _ASSIGNMENT_ORDER, kind


def _drop_private(text: str) -> tuple[str, list[tuple[int, int, str]]]:
    """The text without its private sections, and where their markers now stand."""
    pieces: list[str] = []
    marks: list[tuple[int, int, str]] = []
    at = length = 0
    for m in _PRIVATE.finditer(text):
        pieces.append(text[at : m.start()])
        length += m.start() - at
        pieces.append(PRIVATE_MARKER)
        marks.append((length, length + len(PRIVATE_MARKER), "private"))
        length += len(PRIVATE_MARKER)
        at = m.end()
    pieces.append(text[at:])
    return "".join(pieces), marks


def redact(text: str) -> Redaction:
    """Take every secret and private section out of ``text``.

    Pure and fast: the patterns are compiled once, and nothing is read or
    written. Redacting redacted text changes nothing.

    Args:
        text: what a hook captured.

    Returns:
        The safe text and the kinds of what was taken out, in order.
    """
    text, found = _drop_private(text) if "<" in text else (text, [])
    text, kinds = _replace(text, found)
    # A marker in place of one secret may end the word another was glued to;
    # go round until nothing more is found, so that redacting again is a no-op.
    more = kinds
    for _ in range(3):
        if not more:
            break
        text, more = _replace(text, [])
        kinds.extend(more)
    return Redaction(text, tuple(kinds))


def _replace(text: str, found: list[tuple[int, int, str]]) -> tuple[str, list[str]]:
    """``text`` with ``found`` and every secret in it replaced, and their kinds in order."""
    end = -1
    for start, stop, _, kind in sorted(_finds(text), key=lambda f: (f[0], f[2], -f[1])):
        if start < end:
            # Overlapping finds become one span, so no part of either is left.
            found[-1] = (found[-1][0], max(end, stop), found[-1][2])
            end = max(end, stop)
            continue
        found.append((start, stop, kind))
        end = stop
    pieces: list[str] = []
    kinds: list[str] = []
    at = 0
    for start, stop, kind in sorted(found):
        if start < at:
            continue
        pieces.append(text[at:start])
        pieces.append(PRIVATE_MARKER if kind == "private" else f"[redacted:{kind}]")
        kinds.append(kind)
        at = stop
    pieces.append(text[at:])
    return "".join(pieces), kinds
