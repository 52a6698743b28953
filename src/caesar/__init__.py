"""CAESAR: context-aware complex event processing.

    import caesar
    model = caesar.compile("model.caesar")
    for alert in model.session().run(events):
        ...

See docs/python.md. The `caesar` command (caesar.cli) covers the same ground
from the shell, plus the local runtime and deployments.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from caesar.api import Model, Output, Session, attach, compile, deploy, update
from caesar.errors import CaesarError, ModelError, SourcePosition
from caesar.plans.functions import function
from caesar.services.common.messages import Alert, ContextChange, DeadLetter

try:
    __version__ = version("caesar-cep")
except PackageNotFoundError:  # running from a checkout without an install
    __version__ = "0+unknown"

__all__ = ["Alert", "CaesarError", "ContextChange", "DeadLetter", "Model", "ModelError",
           "Output", "Session", "SourcePosition", "__version__", "attach", "compile", "deploy",
           "function", "update"]
