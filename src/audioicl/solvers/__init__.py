"""The built-in solvers: code that answers a chat without any model (``builtin:<name>``, served by the
``builtin`` backend kind). ``registry`` holds ``SOLVERS`` and what solvers share (reading a chat's items);
``floors`` the chance floors (random, majority), ``textonly`` the best a reader of the prompt's text alone can
do, ``perceiving`` the solvers that listen (oracle, icl). Importing this package registers them all."""

from . import floors, perceiving, textonly  # noqa: F401  (register their solvers)
from .registry import SOLVERS, Solver, register_solver

__all__ = ["SOLVERS", "Solver", "register_solver"]
