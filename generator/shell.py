"""Render shell scripts from Jinja templates where every interpolated value is shell-quoted by default.

Quoting is the template environment's `finalize`, so a template cannot forget it: a model name with
`;`, `$(...)`, quotes, spaces or newlines always lands as one literal word. Only `ShellRaw` text, built by
code from constants, passes unquoted. None is an error (no "None" in scripts), and so is any undefined
name (StrictUndefined): a template error is never a quiet fallback.
"""

from __future__ import annotations

import shlex
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from perfledger.generator.errors import GeneratorError


class ShellRaw(str):
    """Trusted shell text produced by generator code (never from input), emitted verbatim."""


def sh_quote(value: Any) -> str:
    """Quote a value as shell word(s): lists become space-separated quoted words."""
    if isinstance(value, ShellRaw):
        return str(value)
    if value is None:
        raise GeneratorError("template", "a template interpolated None")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return " ".join(sh_quote(v) for v in value)
    return shlex.quote(str(value))


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
        undefined=jinja2.StrictUndefined, autoescape=False, finalize=sh_quote,
        keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True,
        comment_start_string="<#", comment_end_string="#>",  # bash uses `${#array[@]}`
    )


def render_shell(template: str, **context: Any) -> str:
    """Render templates/<template>; any Jinja error becomes a GeneratorError naming the template."""
    try:
        return _environment().get_template(template).render(**context)
    except jinja2.TemplateError as exc:
        line = getattr(exc, "lineno", None)
        raise GeneratorError(f"generator/templates/{template}" + (f":{line}" if line else ""), str(exc)) from None
